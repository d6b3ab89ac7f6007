"""The agent's entry: parse torchrun's flags, pick the engine, run the node (or exec torchrun)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from trainlaunch import settings
from trainlaunch.agent import flags, workers
from trainlaunch.agent.plan import TORCHRUN, choose_engine, node_environ, plan_node
from trainlaunch.agent.requeues import after_requeue, pod_attempt
from trainlaunch.agent.state import AgentRecord, agent_file
from trainlaunch.errors import UsageError
from trainlaunch.node.processes import keep_files_private


def exec_torchrun(args: flags.AgentArgs, reason: str) -> None:
    """Replace this process with real torchrun (same interpreter, same pid for the backend)."""
    from trainlaunch.agent.torchrun import torchrun_argv

    replica_dir = os.environ.get(settings.REPLICA_LOG_DIR)
    argv = torchrun_argv(
        args,
        os.environ,
        args.log_dir or replica_dir,
        os.environ.get("PYTHON_EXEC") or sys.executable,
    )
    if replica_dir:
        os.makedirs(replica_dir, exist_ok=True)
        AgentRecord(agent_file(replica_dir), engine=TORCHRUN, reason=reason, argv=argv).update(
            state="RUNNING"
        )
    os.write(2, f"[trainlaunch] using torchrun: {reason}\n".encode())
    os.execvp(argv[0], argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one node; the exit code is the failing rank's (128+N for a signal)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    attempt = pod_attempt(os.environ)  # Kubernetes: the pod's attempt, before any rank starts
    if attempt.note:
        os.write(2, f"{attempt.note}\n".encode())
    if attempt.exit_code is not None:
        return attempt.exit_code
    os.environ.update(attempt.env or {})  # inherited by every worker (and by torchrun)
    try:
        args = flags.parse(argv, os.environ)
        engine, reason = choose_engine(args)
        if args.preflight:  # imported here: the request module brings specs (~8 ms of a start)
            from trainlaunch.agent.request import check_preflight

            check_preflight(args, engine, reason)
        if engine == TORCHRUN:
            exec_torchrun(args, reason)
        plan = plan_node(args, os.environ)
        # the agent's own files (agent.json, per-rank logs) are private; ranks keep the umask
        workers.USER_UMASK = keep_files_private()
    except UsageError as e:
        hint = f"\nhint: {e.hint}" if e.hint else ""
        os.write(2, f"trainlaunch.agent: error: {e}{hint}\n".encode())
        return 2
    os.environ.update(node_environ(args, plan.nproc, os.environ))  # inherited, as torchrun's
    from trainlaunch.agent.node import NodeAgent

    code = NodeAgent(args, plan, os.environ).run()
    if code == settings.REQUEUE_EXIT_CODE:  # Kubernetes: was that the replica's last requeue?
        end = after_requeue(os.environ)
        if end.exit_code is not None:
            os.write(2, f"{end.note}\n".encode())
            return end.exit_code
    return code
