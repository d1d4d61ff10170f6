# The stdout callback `gpucluster up` runs the host layer with: one JSON object per line, which the
# flow (src/gpucluster/hostlayer.py) turns into progress per play and host and into its summary.
# Results of no_log tasks reach callbacks censored by Ansible itself; this plugin adds nothing of a
# result but its status and, for a failure, its message.
from __future__ import annotations

import json
import sys

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: gpucluster_progress
    type: stdout
    short_description: JSON lines of play, task results and stats for gpucluster up
    description:
      - One JSON object per line on stdout; read by gpucluster's host-layer phase.
"""

#: The most of a module's stdout and stderr a failure line carries (module output can be long), and of
#: its message: that is written for people (the preflight role's names every host and problem at once).
MESSAGE_CHARS = 2000
MSG_CHARS = 20000


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "gpucluster_progress"

    def _emit(self, **event) -> None:
        sys.stdout.write(json.dumps(event, default=str) + "\n")
        sys.stdout.flush()

    def v2_playbook_on_play_start(self, play):
        self._emit(event="play", name=play.get_name().strip())

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._emit(event="task", name=task.get_name().strip())

    def _result(self, result, status: str) -> None:
        event = {"event": "result", "status": status, "host": result._host.get_name(),
                 "task": result._task.get_name().strip()}
        if status in ("failed", "unreachable"):
            res = result._result
            parts = [str(res.get("msg") or "")[:MSG_CHARS]]
            for key in ("stderr", "stdout"):
                if res.get(key):
                    parts.append(str(res[key])[-MESSAGE_CHARS:])
            event["msg"] = "\n".join(p for p in parts if p)
            # ignore_unreachable keeps an unreachable host in the play (the preflight role records it and
            # reports it by name with every other problem): like ignore_errors, not the run's failure.
            event["ignored"] = bool(result._task.ignore_unreachable if status == "unreachable"
                                    else result._task.ignore_errors)
        self._emit(**event)

    def v2_runner_on_ok(self, result):
        self._result(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._result(result, "unreachable")

    def v2_runner_on_skipped(self, result):
        self._result(result, "skipped")

    def v2_runner_item_on_failed(self, result):
        pass  # the task's own failed result follows with every item's outcome

    def v2_playbook_on_stats(self, stats):
        hosts = {}
        for host in sorted(stats.processed):
            s = stats.summarize(host)
            hosts[host] = {k: s.get(k, 0) for k in ("ok", "changed", "failures", "unreachable", "skipped",
                                                    "rescued", "ignored")}
        self._emit(event="stats", hosts=hosts)

    def v2_playbook_on_no_hosts_matched(self):
        self._emit(event="no-hosts")
