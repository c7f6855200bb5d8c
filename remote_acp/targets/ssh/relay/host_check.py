"""Whether a host keeps what a login leaves behind: run by the start step before it promises a window.

What ends a detached relay on Linux hosts:

* systemd-logind ``KillUserProcesses=yes`` (for this user: ``KillExcludeUsers``, root by default,
  and ``KillOnlyUsers`` narrow it): at logout the session's scope, a cgroup that ``setsid`` does
  not leave, is stopped with every process in it;
* ``StopIdleSessionSec=`` (systemd 252+): an idle session is stopped the same way;
* ``/run/user/UID`` (``$XDG_RUNTIME_DIR``) is removed when the user's last session ends unless the
  user lingers: a spool or a slot there would go with it. So the check refuses too when the
  sessions' directory would be there (``in_runtime=yes``) and it is not kept
  (``runtime_kept=no``), naming the fix (``loginctl enable-linger USER``).

A login in no logind session (no PAM or systemd, a container) has nothing that reaps the relay.
logind's settings come from ``loginctl`` when it answers, else from its configuration files in
logind's order (the last assignment wins; the compiled default is ``no`` on the common
distributions, reported as ``no?``).

Run as ``sh -c TEXT ra-check BASE`` (the start step runs it as a function, in a command
substitution, and asks for the verdict only), ``BASE`` the directory the sessions would live in
(the user's slot directory); without it, the default slot place is assumed: the runtime directory
when there is one. The script prints one line, :data:`HOST_CHECK_MARK` then ``verdict=ok|refuse`` and what it found,
``spool=DIR`` (where a detached session's files may live: the runtime directory when it is kept,
else the home's cache) and, on a refusal, ``reason="..."``. :func:`parse_host_check` reads it.
"""

from __future__ import annotations

import shlex
from typing import Final

__all__ = ["HOST_CHECK_MARK", "NO_WINDOW_MARK", "host_check_script", "parse_host_check"]

HOST_CHECK_MARK: Final = "RA-HOSTCHECK"
NO_WINDOW_MARK: Final = "remote-acp: this host does not keep a detached session:"

_CHECK = r"""
_ra_base=${1-}
# 1. a logind session? its scope is in our cgroup path
_ra_scope=
while IFS= read -r _ra_l; do
  case $_ra_l in *.scope*) _ra_s=${_ra_l##*/}; case $_ra_s in session-*.scope) _ra_scope=$_ra_s ;; esac ;; esac
done <"__CGROUP__" 2>/dev/null
__QUICK__
# The effective uid, as id -u prints it (the second Uid field of our status), without a program
_ra_uid=
{ while read -r _ra_k _ra_r _ra_e _ra_x; do
    case $_ra_k in Uid:) _ra_uid=$_ra_e; break ;; esac
  done </proc/self/status; } 2>/dev/null
case $_ra_uid in ''|*[!0-9]*) _ra_uid=$(id -u) ;; esac
_ra_user=$(id -un 2>/dev/null || echo "$_ra_uid")
# 2. logind's settings: from logind itself (manager properties), else from its files
_ra_kill=unknown _ra_only= _ra_excl=unset _ra_idle= _ra_linger=unknown _ra_src=
if command -v loginctl >/dev/null 2>&1 &&
   _ra_p=$(loginctl show-session -p KillUserProcesses -p KillOnlyUsers -p KillExcludeUsers \
     -p StopIdleSessionSec 2>/dev/null) &&
   [ -n "$_ra_p" ]; then
  _ra_src=loginctl _ra_excl=   # logind's effective list (an empty property is not printed)
  _ra_nl='
'
  _ra_ifs=$IFS; IFS=$_ra_nl
  for _ra_l in $_ra_p; do
    case $_ra_l in
      KillUserProcesses=*) _ra_kill=${_ra_l#*=} ;;
      KillOnlyUsers=*) _ra_only=${_ra_l#*=} ;;
      KillExcludeUsers=*) _ra_excl=${_ra_l#*=} ;;
      StopIdleSessionSec=*) _ra_idle=${_ra_l#*=} ;;
    esac
  done
  IFS=$_ra_ifs
  _ra_v=$(loginctl show-user "$_ra_uid" -p Linger 2>/dev/null) && _ra_linger=${_ra_v#Linger=}
else
  # the files, in logind's order: the main file, then drop-ins (the last assignment wins)
  for _ra_f in /etc/systemd/logind.conf /usr/lib/systemd/logind.conf.d/*.conf \
            /usr/local/lib/systemd/logind.conf.d/*.conf /run/systemd/logind.conf.d/*.conf \
            /etc/systemd/logind.conf.d/*.conf; do
    [ -r "$_ra_f" ] || continue
    _ra_src=files
    while IFS= read -r _ra_l; do
      case $_ra_l in
        KillUserProcesses=*) _ra_kill=${_ra_l#*=} ;;
        KillOnlyUsers=*) _ra_only=${_ra_l#*=} ;;
        KillExcludeUsers=*) _ra_excl=${_ra_l#*=} ;;
        StopIdleSessionSec=*) _ra_idle=${_ra_l#*=} ;;
      esac
    done <"$_ra_f"
  done
  # compiled default: "no" on Debian, Ubuntu, Fedora, RHEL, Arch (upstream's meson default is yes)
  [ "$_ra_src" = files ] && [ "$_ra_kill" = unknown ] && _ra_kill="no?"
  if [ -d /var/lib/systemd/linger ]; then
    if [ -e "/var/lib/systemd/linger/$_ra_user" ]; then _ra_linger=yes; else _ra_linger=no; fi
  fi
fi
case $_ra_kill in 1|true|on) _ra_kill=yes ;; 0|false|off) _ra_kill=no ;; esac
case $_ra_linger in 1|true|on) _ra_linger=yes ;; 0|false|off) _ra_linger=no ;; esac
# does KillUserProcesses apply to this user?
_ra_applies=$_ra_kill
[ "$_ra_excl" = unset ] && _ra_excl=root
case " $_ra_excl " in *" $_ra_user "*) _ra_applies=no ;; esac
if [ "$_ra_applies" = yes ] && [ -n "$_ra_only" ]; then
  case " $_ra_only " in *" $_ra_user "*) ;; *) _ra_applies=no ;; esac
fi
# 3. the runtime directory: kept after the last logout only when the user lingers
_ra_ru=__RUNUSER__
_ra_rt=${XDG_RUNTIME_DIR:-$_ra_ru/$_ra_uid}; _ra_rtkeep=yes
case $_ra_rt in "$_ra_ru"/*) [ -n "$_ra_scope" ] && [ "$_ra_linger" != yes ] && _ra_rtkeep=no ;; esac
[ -d "$_ra_rt" ] || _ra_rtkeep=absent
# Where the sessions' directory is: given, or the default slot place, the runtime directory when
# there is one
_ra_inrt=no
if [ -n "$_ra_base" ]; then
  case $_ra_base in "$_ra_rt"|"$_ra_rt"/*|"$_ra_ru/$_ra_uid"|"$_ra_ru/$_ra_uid"/*) _ra_inrt=yes ;; esac
elif [ "$_ra_rtkeep" != absent ]; then
  _ra_inrt=yes
fi
# 4. verdict and spool place
_ra_verdict=ok _ra_reason=
if [ -z "$_ra_scope" ]; then
  _ra_logind=no   # no logind session (no PAM/systemd, a container, UsePAM no): nothing reaps the relay
else
  _ra_logind=yes
  if [ "$_ra_applies" = yes ]; then
    _ra_verdict=refuse
    _ra_reason="systemd-logind KillUserProcesses=yes: the host kills a login's processes at logout"
    _ra_reason="$_ra_reason (setsid does not leave the session's cgroup)"
  elif [ -n "$_ra_idle" ] && [ "$_ra_idle" != infinity ] && [ "$_ra_idle" != 0 ]; then
    _ra_verdict=refuse
    _ra_reason="systemd-logind StopIdleSessionSec=$_ra_idle: an idle session is stopped with its processes"
  fi
fi
if [ "$_ra_verdict" = ok ] && [ "$_ra_inrt" = yes ] && [ "$_ra_rtkeep" = no ]; then
  _ra_verdict=refuse
  _ra_reason="the sessions' directory ${_ra_base:-$_ra_rt} is in the runtime directory $_ra_rt, removed at the"
  _ra_reason="$_ra_reason user's last logout; keep it with: loginctl enable-linger $_ra_user"
fi
if [ "$_ra_rtkeep" = yes ]; then _ra_spool=$_ra_rt/remote-acp-slots
else
  _ra_h=; [ -r /proc/sys/kernel/hostname ] && read -r _ra_h </proc/sys/kernel/hostname
  _ra_spool=${HOME-}/.cache/remote-acp-slots/${_ra_h:-host}
fi
printf '__MARK__ verdict=%s logind=%s scope=%s kill=%s applies=%s linger=%s ' \
  "$_ra_verdict" "$_ra_logind" "${_ra_scope:-none}" "$_ra_kill" "$_ra_applies" "$_ra_linger"
printf 'src=%s runtime=%s runtime_kept=%s in_runtime=%s spool=%s' "${_ra_src:-none}" "$_ra_rt" "$_ra_rtkeep" \
  "$_ra_inrt" "$_ra_spool"
[ -n "$_ra_reason" ] && printf ' reason="%s"' "$_ra_reason"
printf '\n'
"""


# Outside a logind session the verdict is ok whatever logind's settings: nothing reaps the relay,
# and the runtime directory is not removed under it.
_QUICK = "[ -n \"$_ra_scope\" ] || { printf '%s\\n' '__MARK__ verdict=ok logind=no scope=none'; exit 0; }"


def host_check_script(
    *, cgroup_file: str = "/proc/self/cgroup", run_user: str = "/run/user", verdict_only: bool = False
) -> str:
    """The check's text (see the module docstring). ``cgroup_file`` and ``run_user`` stand for
    ``/proc/self/cgroup`` and ``/run/user`` (tests point them at files of their own).
    ``verdict_only``: outside a logind session, print only ``verdict=ok logind=no scope=none``
    at once, without asking logind (what the start step needs: no ``loginctl``, no ``id``)."""
    return (
        _CHECK.replace("__QUICK__", _QUICK if verdict_only else "")
        .replace("__CGROUP__", shlex.quote(cgroup_file))
        .replace("__RUNUSER__", shlex.quote(run_user))
        .replace("__MARK__", HOST_CHECK_MARK)
    )


def parse_host_check(line: str) -> dict[str, str]:
    """The fields of the check's line (``reason`` unquoted); empty for a line that is not one."""
    if not line.startswith(HOST_CHECK_MARK + " "):
        return {}
    head, _, reason = line.partition(' reason="')
    fields = dict(word.split("=", 1) for word in head.split()[1:] if "=" in word)
    if reason:
        fields["reason"] = reason.rstrip().removesuffix('"')
    return fields
