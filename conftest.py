from __future__ import annotations

import logging
import os
import uuid
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.process.containment import close_launcher
from tests.support.orphans import MARKER_NAME, become_subreaper, kill_marked, live_children, settle_children
from tests.support.tiers import classify, forbid_processes, longest_first, needs_process

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator
    from pathlib import Path


SUBREAPER = become_subreaper()
"""Orphans of the tests' processes come to this process, marked or not (tests/support/orphans.py)."""


# -- tiers (tests/support/tiers.py) -----------------------------------------------------------------

PROCESS = frozenset(
    {
        "tests/test_call_failures.py",
        "tests/test_cli_inventory.py",
        "tests/test_cli_output.py",
        "tests/test_cli_resume.py",
        "tests/test_cli_start_causes.py",
        "tests/test_cli_tokens.py",
        "tests/test_cli_validate.py",
        "tests/test_containment.py",
        "tests/test_continuation.py",
        "tests/test_demo.py",
        "tests/test_descriptors.py",
        "tests/test_host_config_ssh.py",
        "tests/test_hostile_text.py",
        "tests/test_hostinv_probe_host.py",
        "tests/test_hostinv_probe_login.py",
        "tests/test_hostinv_probe_run.py",
        "tests/test_launcher.py",
        "tests/test_load_spacing.py",
        "tests/test_local_env_secrets.py",
        "tests/test_mcp_session.py",
        "tests/test_needs_person.py",
        "tests/test_posture.py",
        "tests/test_pressure.py",
        "tests/test_private_slots.py",
        "tests/test_quiet_library.py",
        "tests/test_ready_marker.py",
        "tests/test_sdk_agent.py",
        "tests/test_session_start.py",
        "tests/test_ssh_env.py",
        "tests/test_ssh_script.py",
        "tests/test_ssh_supervisor.py",
        "tests/test_teardown.py",
        "tests/test_turns.py",
        "tests/test_cache_trust.py::test_a_session_history_others_can_write_is_refused",
        "tests/test_cache_trust.py::test_check_host_refuses_a_cache_others_can_write_before_probing",
        "tests/test_capabilities.py::test_events_queued_for_a_turn_that_never_starts_are_dropped_with_a_count",
        "tests/test_capabilities.py::test_first_turn_names_the_gaps_once",
        "tests/test_cli_check.py::test_a_check_of_an_unchanged_inventory_loads_neither_yaml_nor_pydantic",
        "tests/test_cli_check.py::test_a_check_of_our_inventory_loads_no_ansible_parser",
        "tests/test_cli_check.py::test_a_host_nobody_listens_on_is_unreachable_exit_20",
        "tests/test_cli_check.py::test_a_probe_only_check_loads_no_session_core",
        "tests/test_cli_check.py::test_a_probe_only_check_loads_no_unused_parser_nor_the_ssh_target",
        "tests/test_cli_check.py::test_an_invalid_inventory_file_exits_10_naming_it",
        "tests/test_cli_check.py::test_check_host_and_run_select_from_an_ansible_inventory",
        "tests/test_cli_check.py::test_json_streams_each_host_and_an_interrupt_keeps_what_is_known_exit_130",
        "tests/test_cli_check.py::test_usage_errors_exit_2",
        "tests/test_cli_check.py::test_version_loads_neither_the_fleet_nor_hostinv",
        "tests/test_filesystem.py::test_a_file_swapped_for_a_symlink_is_never_followed",
        "tests/test_fleet_login_probe.py::test_the_script_skips_the_version_and_its_bound_covers_what_it_runs",
        "tests/test_fleet_pool.py::test_hosts_that_refuse_are_probed_once_however_many_ask_and_kept_out",
        "tests/test_fleet_pool.py::test_waiting_for_a_slot_never_waits_for_hosts_that_are_down",
        "tests/test_host_slots.py::test_a_full_host_refuses_the_next_session_before_it_starts",
        "tests/test_host_slots.py::test_a_larger_capacity_takes_the_slots_a_smaller_one_leaves",
        "tests/test_host_slots.py::test_a_slot_directory_no_session_can_use_makes_the_host_at_capacity",
        "tests/test_host_slots.py::test_a_slot_directory_of_another_user_is_refused",
        "tests/test_host_slots.py::test_a_slot_directory_that_is_a_link_is_refused",
        "tests/test_host_slots.py::test_a_slot_frees_when_its_session_is_killed_whatever_held_it",
        "tests/test_host_slots.py::test_a_slot_is_free_the_moment_its_session_ended",
        "tests/test_host_slots.py::test_slots_are_counted_among_many_other_locks",
        "tests/test_host_slots.py::test_the_probe_counts_nothing_where_no_session_ever_ran",
        "tests/test_host_slots.py::test_the_slot_tools_are_checked_before_anything_runs",
        "tests/test_hostinv_boundary.py::test_importing_every_hostinv_module_loads_neither_remote_acp_nor_asyncssh",
        "tests/test_hostinv_bounds.py::test_our_own_file_refuses_the_billion_laughs_too",
        "tests/test_hostinv_bounds.py::test_the_32_byte_range_bomb_is_refused_at_once",
        "tests/test_hostinv_bounds.py::test_the_billion_laughs_through_merge_keys_is_refused",
        "tests/test_hostinv_bounds.py::test_the_billion_laughs_yaml_is_refused_before_anything_walks_it",
        "tests/test_hostinv_bounds.py::test_the_same_hosts_listed_in_many_groups_are_bounded_too",
        "tests/test_hostinv_kept.py::test_a_kept_inventory_loads_neither_yaml_nor_pydantic",
        "tests/test_hostinv_resolve_cache.py::test_a_config_changed_just_before_the_run_is_not_kept",
        "tests/test_hostinv_resolve_cache.py::test_a_config_that_depends_on_more_than_its_text_is_never_kept",
        "tests/test_hostinv_resolve_cache.py::test_a_damaged_entry_is_a_miss",
        "tests/test_hostinv_resolve_cache.py::test_a_file_added_to_an_included_directory_is_read",
        "tests/test_hostinv_resolve_cache.py::test_a_variable_the_config_names_is_part_of_the_answer",
        "tests/test_hostinv_resolve_cache.py::test_an_answer_is_kept_and_reused_while_the_config_is_unchanged",
        "tests/test_hostinv_resolve_cache.py::test_an_edited_config_is_read_again",
        "tests/test_hostinv_resolve_cache.py::test_why_ssh_refused_the_config_is_its_own_line_not_the_verbose_chatter",
        "tests/test_hostinv_resolve_cache.py::test_without_a_cache_directory_ssh_is_asked_every_time",
        "tests/test_hostinv_runner.py::test_a_config_ssh_cannot_read_is_a_verdict_not_an_exception",
        "tests/test_hostinv_runner.py::test_a_known_hosts_line_is_found_by_ssh_keygen",
        "tests/test_hostinv_runner.py::test_probe_hosts_keeps_input_order_and_reports_each_as_it_ends",
        "tests/test_hostinv_runner.py::test_ssh_g_output_is_read_as_ssh_would_use_it",
        "tests/test_hostinv_runner.py::test_the_hosts_own_fields_override_the_config_as_on_the_command_line",
        "tests/test_measure.py::test_a_start_runs_the_runtime_at_most_three_times",
        "tests/test_measure.py::test_a_wait_shorter_than_the_source_window_keeps_the_source",
        "tests/test_posture_advertised.py::test_the_capabilities_sent_follow_the_options",
        "tests/test_probe_bounds.py::test_an_answer_that_depends_on_dns_is_never_kept",
        "tests/test_probe_bounds.py::test_the_fallback_config_tells_ssh_s_default_from_ask",
        "tests/test_public_api.py::test_importing_the_package_loads_nothing_heavy",
        "tests/test_public_api.py::test_public_names_are_typed_and_a_misspelt_one_fails_type_checking",
        "tests/test_scripted_agent.py::test_cancel_during_sleep",
        "tests/test_scripted_agent.py::test_crash_at_initialize",
        "tests/test_scripted_agent.py::test_scripted_error_data_auth_methods_and_a_slow_method",
        "tests/test_ssh_argv.py::test_a_damaged_kept_answer_is_asked_again",
        "tests/test_ssh_argv.py::test_a_probe_that_cannot_run_sends_only_what_every_ssh_knows_and_is_not_remembered",
        "tests/test_ssh_argv.py::test_a_users_config_cannot_change_what_ssh_does_to_a_session",
        "tests/test_ssh_argv.py::test_a_users_control_master_cannot_turn_sharing_back_on",
        "tests/test_ssh_argv.py::test_sessions_starting_together_share_one_probe",
        "tests/test_ssh_argv.py::test_ssh_argv_remote_word_runs_the_script_through_a_login_shell",
        "tests/test_ssh_argv.py::test_the_answer_is_kept_for_the_next_process_while_the_binary_is_the_same",
        "tests/test_ssh_argv.py::test_the_installed_ssh_is_probed_for_real",
        "tests/test_ssh_argv.py::test_the_probe_finds_what_an_older_ssh_knows_once_per_process",
        "tests/test_ssh_argv.py::test_the_ssh_flags_reach_the_settings",
        "tests/test_ssh_argv.py::test_those_waiting_on_a_failed_probe_share_its_empty_answer_and_the_next_asks_again",
        "tests/test_ssh_config.py::test_effective_host_key_policy_reads_ssh_g_spellings",
        "tests/test_ssh_config.py::test_prepare_explicit_policy_and_config_file",
        "tests/test_ssh_config.py::test_prepare_explicit_policy_without_config_file_includes_what_ssh_reads",
        "tests/test_ssh_config.py::test_prepare_never_passes_a_policy_of_ours_and_warns_when_the_config_turns_checking_off",
        "tests/test_ssh_config.py::test_prepare_with_a_config_file_includes_it_by_absolute_path",
        "tests/test_ssh_config.py::test_prepare_with_no_config_file_includes_nothing",
        "tests/test_ssh_config.py::test_preparing_a_session_over_ssh_loads_no_inventory_machinery",
        "tests/test_ssh_config.py::test_real_ssh_includes_exactly_the_named_file_whatever_its_path",
        "tests/test_ssh_config.py::test_real_ssh_reads_the_users_config_under_the_login_home",
        "tests/test_ssh_config.py::test_real_ssh_reads_the_users_policy_first_and_ours_as_the_fallback",
        "tests/test_ssh_config.py::test_the_policy_is_asked_of_ssh_once_while_the_users_config_is_unchanged",
        "tests/test_ssh_script_data.py::test_remote_script_and_loader_are_valid_posix_sh",
        "tests/test_ssh_settings.py::test_ifs_or_ppid_from_the_environment_would_break_the_supervisor",
    }
)
"""What starts processes in tests/: whole modules (their path from the repository's root), and
single tests (node ids without parameters) in modules where most start none. Tests asking for a
fixture that starts one, and everything under integration/, are marked without being named."""

TIMING = frozenset(
    {
        "integration/test_fleet_pool_scheduler.py::test_a_job_queue_over_the_pool_survives_a_host_killed_mid_run",
        "integration/test_ssh.py::test_connect_timeout_to_an_unreachable_host",
        "integration/test_ssh.py::test_link_cut_mid_turn_ends_within_keepalive_bound",
        "integration/test_ssh_starts.py",
        "tests/test_call_failures.py::test_a_start_error_keeps_its_data",
        "tests/test_cli_sessions.py::test_history_lock_wait_is_bounded",
        "tests/test_hostinv_bounds.py::test_the_same_hosts_listed_in_many_groups_are_bounded_too",
        "tests/test_launcher.py::test_the_launcher_is_closed_at_interpreter_exit_without_a_resource_warning",
        "tests/test_pressure.py::test_a_flooding_agent_does_not_starve_the_event_loop",
        "tests/test_pressure.py::test_fifty_sessions_keep_their_bounds_while_one_floods",
        "tests/test_pressure.py::test_kill_ends_the_turn_at_once_and_skips_the_graceful_window",
        "tests/test_public_api.py::test_public_names_are_typed_and_a_misspelt_one_fails_type_checking",
        "tests/test_scripted_agent.py::test_cancel_during_sleep",
        "tests/test_session_start.py::test_unanswered_handshake_names_its_bound",
        "tests/test_ssh_supervisor.py",
    }
)
"""Tests that assert how long something took (a bound of a second or two, a loop's worst gap): the
full suite runs them alone, after the parallel part, on a machine no other test loads."""


LONGEST = frozenset(
    {
        "integration/test_check_host.py::test_the_exit_status_says_whether_only_connections_failed",
        "integration/test_cli_wait_for_slot.py",
        "integration/test_fleet_placement.py::test_separate_controllers_never_run_more_agents_than_the_hosts_capacity",
        "integration/test_gemini_cli.py::test_a_session_continued_by_another_process_in_its_creation_minute_keeps_its_history",
        "integration/test_gemini_measure.py::test_a_wrapper_that_does_not_name_the_runtime_settles_by_restarting",
        "integration/test_probe_bounds.py::test_a_login_that_floods_costs_bounded_memory",
        "integration/test_qwen.py::test_handshake_and_streamed_text_turns",
        "integration/test_qwen_resume.py",
        "tests/test_demo.py",
        "tests/test_hostinv_probe_run.py::test_a_quick_agent_never_waits_for_the_bound",
    }
)
"""The tests that take longest (tens of seconds, a minute for some): a parallel run starts them first."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    classify(items, lambda name: getattr(pytest.mark, name), {"process": PROCESS, "timing": TIMING})
    longest_first(items, LONGEST, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _processes_only_where_marked(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _processes_only_where_marked(item, "call"))


def _processes_only_where_marked(item: pytest.Item, phase: str) -> Iterator[None]:
    """A test not marked as needing a process cannot start one, not even in the fixtures set up
    for it (see tests/support/tiers.py). Teardown is left free: the last test of a module or a
    session tears down what the tests before it set up."""
    if needs_process(item):
        return (yield)
    attempts: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        forbid_processes(patch, item.nodeid, attempts)
        try:
            result = yield
        except BaseException as exc:
            if attempts:
                raise pytest.fail.Exception(_forbidden(attempts, phase), pytrace=False) from exc
            raise
    if attempts:
        raise pytest.fail.Exception(_forbidden(attempts, phase), pytrace=False)
    return result


def _forbidden(attempts: list[str], phase: str) -> str:
    return (
        f"started a process in its {phase} without the `process` mark ({'; '.join(attempts)}): mark it "
        "`process` (or `ssh`/`runtime`) in the test, or in the root conftest.py's tables"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Captured output as UTF-8 can carry it: a test's logs may hold a lone surrogate (a path no
    file can have), which a report sent from a parallel worker could not encode."""
    report = yield
    report.sections = [(title, _encodable(text)) for title, text in report.sections]
    if isinstance(report.longrepr, str):
        report.longrepr = _encodable(report.longrepr)
    return report


def _encodable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.fixture(autouse=True)
def no_orphans(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test that leaves a process it started running (see tests/support/orphans.py).

    A test without the ``process`` mark could start none, so nothing is looked for after it."""
    if not needs_process(request.node):
        yield
        return
    marker = uuid.uuid4().hex
    previous = os.environ.get(MARKER_NAME)
    os.environ[MARKER_NAME] = marker
    before = live_children() if SUBREAPER else set()
    try:
        yield
    finally:
        if previous is None:
            del os.environ[MARKER_NAME]
        else:
            os.environ[MARKER_NAME] = previous
        close_launcher()  # the process's supervisor launcher, started by the test's first session
        orphans = kill_marked(marker)
        unmarked = settle_children(before) if SUBREAPER else []
        assert not orphans, f"processes outlived the test: {orphans}"
        assert not unmarked, f"processes outlived the test (reparented to the test process): {unmarked}"


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's saved sessions and the generated ssh configs go to the test's own directories,
    never the user's."""
    monkeypatch.setenv("REMOTE_ACP_STATE_DIR", str(tmp_path / "remote-acp-state"))
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "remote-acp-cache"))


@pytest.fixture(autouse=True)
def restore_root_logging() -> Iterator[None]:
    """The command line configures the root logger when a test runs it in this process; the
    next test starts with the root logger as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Tests marked both_backends run on asyncio and on trio.
    if "anyio_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize("anyio_backend", ["asyncio", "trio"])


@pytest.fixture
def workspace(tmp_path: os.PathLike[str]) -> str:
    path = os.path.join(os.fspath(tmp_path), "ws")
    os.mkdir(path)
    return path
