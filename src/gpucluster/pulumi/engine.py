"""The Automation API driver: inline programs, a file backend, and no network.

:class:`Engine` finds the Pulumi CLI and the Kubernetes provider (the user's own on PATH first, else
the toolchain's), keeps stack state under one folder (``file://`` backend) and runs ``up``,
``preview`` and ``destroy`` of an inline program. Counts come back per stack; a failure comes back as
:class:`StackFailed` naming the resource the engine reported.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import InputError, Interrupted, StackFailed, StateLocked
from gpucluster.pulumi import fingerprint
from gpucluster.pulumi.objects import PROVIDER_VERSION
from gpucluster.pulumi.plan import StackPlan

#: Oldest CLI whose Automation API runs inline programs without a language host (``--client``).
MIN_CLI = (3, 181)
CHANGE_OPS = ("create", "update", "delete", "replace", "create-replacement", "delete-replaced")


@dataclass
class Counts:
    """What one stack operation did, by operation (``create``, ``update``, ``delete``, ``same`` …).

    ``inputs_unchanged``: the engine did not run, as the stack's inputs are byte-identical to those of its
    last successful update (:mod:`gpucluster.pulumi.fingerprint`); ``same`` is then what that state holds.
    """

    stack: str
    operation: str
    changes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    inputs_unchanged: bool = False
    #: A preview's steps other than ``same``, one per resource (:func:`_step`): what ``plan`` writes.
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return sum(n for op, n in self.changes.items() if op in CHANGE_OPS)

    def as_dict(self) -> dict[str, Any]:
        c = self.changes
        return {"stack": self.stack, "operation": self.operation, "seconds": round(self.seconds, 2),
                "created": c.get("create", 0), "updated": c.get("update", 0) + c.get("replace", 0),
                "deleted": c.get("delete", 0), "same": c.get("same", 0),
                # objects adopted (`up --adopt`): taken into the state, not created
                "imported": c.get("import", 0), "inputs_unchanged": self.inputs_unchanged,
                # a preview's steps, object by object (what `gpucluster plan` writes)
                **({"steps": self.steps} if self.operation == "preview" else {})}


def _version_of(cli: str) -> tuple[int, ...]:
    import subprocess

    try:
        out = subprocess.run([cli, "version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    parts = out.strip().lstrip("v").split("-")[0].split(".")
    return tuple(int(p) for p in parts if p.isdigit())


def find_binaries() -> tuple[Path, Path | None, bool]:
    """(pulumi CLI, provider binary or None, whether these are the user's own).

    A user's ``pulumi`` on PATH (new enough) is used with their own plugins; otherwise both come from
    the toolchain cache (``gpucluster tools install pulumi pulumi-resource-kubernetes``).
    """
    from gpucluster.toolchain import path_of

    own = shutil.which("pulumi")
    if own and _version_of(own)[:2] >= MIN_CLI:
        provider = shutil.which("pulumi-resource-kubernetes")
        return Path(own), Path(provider) if provider else None, True
    return path_of("pulumi"), path_of("pulumi-resource-kubernetes"), False


class Engine:
    """Runs stacks of one environment with state under ``state_dir``."""

    def __init__(self, state_dir: Path, environment: str, backend: str | None = None) -> None:
        """``backend``: a Pulumi backend URL shared between runners (``s3://...``, ``gs://...``, ``azblob://...``,
        ``file://...``; :func:`backend_url`); None keeps the state in ``state_dir/backend``, this machine's."""
        self.dir = state_dir.expanduser().resolve()
        self.environment = environment
        self.backend = backend
        self._exports: dict[str, dict[str, Any]] = {}
        self._cmd: Any = None
        self._env: dict[str, str] | None = None
        self._binaries: tuple[Path, Path | None] | None = None
        self._stacks: dict[str, Any] = {}

    # -- setup --------------------------------------------------------------------------------
    def _passphrase(self) -> str:
        """The user's PULUMI_CONFIG_PASSPHRASE, else one generated once and kept (0600) in the state dir.

        The stacks hold no secrets (the provider gets a kubeconfig path), but the passphrase secrets
        provider still needs one to open a stack.
        """
        if os.environ.get("PULUMI_CONFIG_PASSPHRASE") is not None:
            return os.environ["PULUMI_CONFIG_PASSPHRASE"]
        if os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
            try:
                return Path(os.environ["PULUMI_CONFIG_PASSPHRASE_FILE"]).read_text().rstrip("\n")
            except OSError as err:
                raise InputError(f"PULUMI_CONFIG_PASSPHRASE_FILE: {err}") from None
        if self.backend is not None:
            # Runners sharing a backend share its stacks, so they must share the passphrase too: one generated
            # here would open nothing another runner made.
            raise InputError(f"the stack state is shared ({redact(self.backend)}): set PULUMI_CONFIG_PASSPHRASE (or "
                             "PULUMI_CONFIG_PASSPHRASE_FILE) to the passphrase every runner uses for it")
        path = self.dir / "passphrase"
        if not path.exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(24))
        return path.read_text().strip()

    def setup(self) -> None:
        """Find the binaries and prepare the backend folder and environment (idempotent; starts no engine)."""
        if self._env is not None:
            return
        passphrase = self._passphrase()  # a shared backend without one: a user error before anything else
        cli, provider, own = find_binaries()
        if self.backend is None:
            (self.dir / "backend").mkdir(parents=True, exist_ok=True)
        # PulumiCommand wants <root>/bin/pulumi; a bin folder of links also puts our provider on
        # PATH, where the engine takes it as an ambient plugin for the version the program asks.
        bindir = self.dir / "engine" / "bin"
        bindir.mkdir(parents=True, exist_ok=True)
        links = {"pulumi": cli}
        if provider is not None:
            links["pulumi-resource-kubernetes"] = provider
        for name, target in links.items():
            link = bindir / name
            if not link.is_symlink() or os.readlink(link) != str(target):
                link.unlink(missing_ok=True)
                link.symlink_to(target)
        env = {
            "PULUMI_BACKEND_URL": self.backend or (self.dir / "backend").as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": passphrase,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        if not own:
            # Our CLI gets its own home, so a user's ~/.pulumi (plugins, credentials) is not touched.
            env["PULUMI_HOME"] = str(self.dir / "home")
        self._binaries = (cli, provider)
        self._env = env

    def _command(self) -> Any:
        """The Automation API's handle on the CLI (creating it starts ``pulumi version`` once)."""
        if self._cmd is None:
            from pulumi import automation as auto

            self.setup()
            self._cmd = auto.PulumiCommand(root=str(self.dir / "engine"))
        return self._cmd

    def _stack(self, name: str, program: Callable[[], Any]) -> Any:
        from pulumi import automation as auto

        if name in self._stacks:
            # Selecting a stack is a CLI call; one Engine reuses it and swaps the program only.
            self._stacks[name].workspace.program = program
            return self._stacks[name]
        self.setup()
        assert self._env is not None
        project = f"gpucluster-{name}"
        opts = auto.LocalWorkspaceOptions(
            work_dir=str(self.work_dir(name)),
            pulumi_home=self._env.get("PULUMI_HOME"),
            env_vars=self._env,
            secrets_provider="passphrase",
            project_settings=auto.ProjectSettings(
                name=project, runtime="python",
                backend=auto.ProjectBackend(url=self._env["PULUMI_BACKEND_URL"]),
            ),
            pulumi_command=self._command(),
        )
        self.work_dir(name).mkdir(parents=True, exist_ok=True)
        self._stacks[name] = auto.create_or_select_stack(stack_name=self.environment, project_name=project,
                                                         program=program, opts=opts)
        return self._stacks[name]

    # -- operations ---------------------------------------------------------------------------
    def run(self, name: str, operation: str, program: Callable[[], Any],
            on_output: Callable[[str], None] | None = None, *, inputs: str | None = None) -> Counts:
        """Run ``operation`` (``up``, ``preview`` or ``destroy``) of stack ``name``; return its counts.

        ``inputs`` (an ``up``): the digest of its inputs (:meth:`inputs`), recorded once the update succeeded
        so that a later ``up`` with the same inputs and state may skip the engine (:meth:`converged`).
        """
        self._exports.pop(name, None)  # the state read before this operation is not the state after it
        import time

        from pulumi import automation as auto

        failed: list[str] = []
        summary: dict[str, int] = {}
        steps: list[dict[str, Any]] = []

        def on_event(event: Any) -> None:
            pre = getattr(event, "resource_pre_event", None)
            if pre is not None and operation == "preview":
                step = _step(pre.metadata)
                if step is not None:
                    steps.append(step)
            if getattr(event, "summary_event", None) is not None:
                summary.update({k: int(v) for k, v in (event.summary_event.resource_changes or {}).items()})
            diag = getattr(event, "diagnostic_event", None)
            if diag is not None and diag.severity == "error" and diag.urn:
                failed.append(f"{diag.urn.split('::')[-1]} ({diag.urn.split('::')[-2].split('$')[-1]}): "
                              f"{diag.message.strip()[:800]}")

        start = time.monotonic()
        stack = self._stack(name, program)
        # After up/destroy the Automation API reads outputs (twice) and history back, one CLI start
        # each (0.5-4 s apiece on a busy 2-core machine). We need neither: the counts come from the
        # engine's own summary event above. So those read-backs are answered locally.
        stack.outputs = lambda: {}
        stack.info = lambda *args, **kwargs: _NO_HISTORY
        if operation != "preview":
            # Until this operation succeeds, nothing about this stack is known to be converged.
            fingerprint.forget(self.work_dir(name))
            self._clear_pending(name, stack, on_output)
        ops = {"up": stack.up, "preview": stack.preview, "destroy": stack.destroy}
        if operation not in ops:
            raise ValueError(f"unknown operation {operation!r}")
        try:
            _interruptible(lambda: ops[operation](on_output=on_output, on_event=on_event, color="never"))
            changes = dict(summary)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted during the {operation} of stack {name}: the engine stopped its "
                              f"operation and saved the state in {self.location}. Run the same command "
                              "again to continue from there.") from None
        except auto.errors.CommandError as err:
            if "currently locked" in str(err):
                # pkg/backend/diy/lock.go (v3.274.1): one line per lock, "<url>: created by user@host (pid N) at T"
                holders = [ln.split(": created by ", 1)[1] for ln in str(err).splitlines() if ": created by " in ln]
                raise StateLocked(f"stack {name}: another run is updating it in {self.location} (created by "
                                  f"{'; '.join(holders) or 'a process the lock does not name'}); nothing was "
                                  "changed. Run again once it has ended (`pulumi cancel` removes the lock of a run "
                                  "that died).") from None
            where = "; ".join(dict.fromkeys(failed)) or _last_error(str(err))
            raise StackFailed(f"stack {name}: {operation} failed at {where}. The state is kept in "
                              f"{self.location}; fix the cause and run again to continue.") from None
        if operation == "up":
            fingerprint.remember(self.work_dir(name), inputs, fingerprint.state_digest(self._state_files(name)),
                                 len(self._checkpoint(name).get("resources") or []))
        return Counts(name, operation, {k: int(v) for k, v in changes.items()}, time.monotonic() - start,
                      steps=steps)

    @property
    def location(self) -> str:
        """Where the stack state is, for messages: the shared backend (redacted) or this machine's folder."""
        return redact(self.backend) if self.backend is not None else str(self.dir / "backend")

    # -- converged re-runs ----------------------------------------------------------------------
    @property
    def journal(self) -> Path:
        """The creates journal (:mod:`gpucluster.pulumi.ownership`): what a run was about to create."""
        from gpucluster.pulumi.ownership import JOURNAL

        return self.dir / "work" / JOURNAL

    def work_dir(self, name: str) -> Path:
        """Stack ``name``'s workspace folder (project and stack settings, the last update's record)."""
        return self.dir / "work" / name

    def _state_files(self, name: str) -> list[Path]:
        """The files that hold stack ``name``'s state: its checkpoint (either form) and its stack settings."""
        base = self.dir / "backend" / ".pulumi" / "stacks" / f"gpucluster-{name}"
        return [base / f"{self.environment}.json", base / f"{self.environment}.json.gz",
                self.work_dir(name) / f"Pulumi.{self.environment}.yaml"]

    def inputs(self, name: str, plan: StackPlan, kubeconfig: str | None, context: str | None,
               cluster_uid: str) -> str | None:
        """The digest of stack ``name``'s inputs besides its state (:func:`gpucluster.pulumi.fingerprint.inputs`)."""
        self.setup()
        assert self._binaries is not None and self._env is not None
        return fingerprint.inputs(plan, kubeconfig=kubeconfig, context=context, cluster_uid=cluster_uid,
                                  binaries=self._binaries, env={**os.environ, **self._env})

    def converged(self, name: str, inputs: str | None) -> Counts | None:
        """Counts for an ``up`` the engine need not run: ``inputs`` and the state are those its last successful
        update recorded (every resource unchanged, as that update left it); None when the engine must run.
        A shared backend always runs the engine: another runner may have changed the state since."""
        if self.backend is not None:
            return None
        rec = fingerprint.unchanged(self.work_dir(name), inputs, fingerprint.state_digest(self._state_files(name)))
        if rec is None:
            return None
        return Counts(name, "up", {"same": int(rec.get("resources", 0))}, inputs_unchanged=True)

    def _clear_pending(self, name: str, stack: Any, on_output: Callable[[str], None] | None) -> None:
        """Resume after an interrupted run: drop the creates it left pending (with a refresh).

        An interrupted update leaves "pending operations" in the state, and the engine refuses to run
        over them. Objects whose create was pending are applied again by this run (server-side apply
        adopts one that does exist), so clearing them loses nothing.
        """
        pending = self._pending_operations(name)
        if not pending:
            return
        if on_output:
            on_output(f"stack {name}: {len(pending)} operation(s) left pending by an interrupted run; clearing them")
        stack.refresh(clear_pending_creates=True, color="never", on_output=on_output)


    def forget(self, name: str, urn: str) -> None:
        """Drop one resource from stack ``name``'s state without touching the cluster (``pulumi state
        delete``): for an object that is no longer the one the stack made (see
        :mod:`gpucluster.pulumi.teardown`)."""
        from pulumi import automation as auto

        stack = self._stack(name, lambda: None)
        assert self._env is not None
        self._exports.pop(name, None)
        try:
            self._command().run(["state", "delete", urn, "--stack", self.environment, "--yes", "--color", "never"],
                          stack.workspace.work_dir, self._env)
        except auto.errors.CommandError as err:
            raise StackFailed(f"stack {name}: cannot drop {urn} from the state: {_last_error(str(err))}. Nothing "
                              f"was deleted; the state is in {self.location}.") from None

    def _exported(self, name: str) -> dict[str, Any]:
        """The deployment of stack ``name`` in a shared backend (``pulumi stack export``; {} when it has no such
        stack), read once per run of this Engine until the engine or an import changes it."""
        import json

        from pulumi import automation as auto

        if name not in self._exports:
            self.setup()
            assert self._env is not None
            work = self.work_dir(name)
            work.mkdir(parents=True, exist_ok=True)
            (work / "Pulumi.yaml").write_text(f"name: gpucluster-{name}\nruntime: python\n")
            try:
                listed = self._command().run(["stack", "ls", "--json", "--color", "never"], str(work), self._env)
                stacks = {s.get("name") for s in json.loads(listed.stdout or "[]")}
                if self.environment not in stacks:
                    self._exports[name] = {}
                    return {}
                out = self._command().run(["stack", "export", "--stack", self.environment, "--color", "never"],
                                          str(work), self._env)
            except auto.errors.CommandError as err:
                raise StackFailed(f"stack {name}: cannot read its state from {redact(self.backend or '')}: "
                                  f"{_last_error(str(err))}") from None
            self._exports[name] = dict(json.loads(out.stdout).get("deployment") or {})
        return self._exports[name]

    def share_salt(self, names: Any) -> None:
        """Shared backend: this runner opens the stacks ``names`` with the passphrase salt their state records
        (``secrets_providers``), so that every runner encrypts alike, and a passphrase that does not open that
        salt stops the run here (InputError, exit 2), before anything on the cluster is touched.

        Pulumi keeps a DIY stack's salt in the stack settings file (``Pulumi.<stack>.yaml``, ``encryptionsalt``),
        which is this runner's own; without this, each runner would make a salt of its own, take any
        passphrase, and leave its salt in the shared state for the next. The passphrase is checked the way the
        CLI checks it: ``pulumi config set --secret`` into a scratch settings file holding the shared salt, which
        the CLI refuses with "incorrect passphrase" (pkg/secrets/passphrase/manager.go at v3.274.1).
        """
        import tempfile

        import yaml
        from pulumi import automation as auto

        if self.backend is None:
            return
        for name in names:
            providers = self._exported(name).get("secrets_providers") or {}
            salt = (providers.get("state") or {}).get("salt") if providers.get("type") == "passphrase" else None
            if not isinstance(salt, str) or not salt:
                continue  # a stack not made yet: this runner's salt becomes the shared one
            assert self._env is not None
            work = self.work_dir(name)
            with tempfile.TemporaryDirectory(dir=work) as scratch:
                check = Path(scratch) / f"Pulumi.{self.environment}.yaml"
                check.write_text(yaml.safe_dump({"encryptionsalt": salt}))
                try:
                    self._command().run(["config", "set", "--secret", "--config-file", str(check), "--stack",
                                         self.environment, "gpuclusterPassphraseCheck", "ok", "--color", "never"],
                                        str(work), self._env)
                except auto.errors.CommandError as err:
                    if "incorrect passphrase" in str(err):
                        raise InputError(f"stack {name}: PULUMI_CONFIG_PASSPHRASE does not open the stack state in "
                                         f"{redact(self.backend)} (another runner made it with another passphrase): "
                                         "use the passphrase every runner of this backend uses. Nothing was "
                                         "changed.") from None
                    raise StackFailed(f"stack {name}: cannot check the passphrase: {_last_error(str(err))}") from None
            settings = work / f"Pulumi.{self.environment}.yaml"
            doc = (yaml.safe_load(settings.read_text()) if settings.is_file() else None) or {}
            if doc.get("encryptionsalt") != salt:
                doc["encryptionsalt"] = salt
                settings.write_text(yaml.safe_dump(doc, sort_keys=False))

    def export_state(self, name: str) -> dict[str, Any]:
        """``pulumi stack export`` of stack ``name`` (secrets stay encrypted: no ``--show-secrets``)."""
        import json

        from pulumi import automation as auto

        stack = self._stack(name, lambda: None)
        assert self._env is not None
        try:
            out = self._command().run(["stack", "export", "--stack", self.environment, "--color", "never"],
                                      stack.workspace.work_dir, self._env)
        except auto.errors.CommandError as err:
            raise StackFailed(f"stack {name}: cannot export its state: {_last_error(str(err))}") from None
        return dict(json.loads(out.stdout))

    def import_state(self, name: str, export: dict[str, Any]) -> None:
        """``pulumi stack import`` of ``export`` (as :meth:`export_state` returns it) into stack ``name``."""
        import json
        import tempfile

        from pulumi import automation as auto

        stack = self._stack(name, lambda: None)
        assert self._env is not None
        self._exports.pop(name, None)
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.work_dir(name)) as fh:
            json.dump(export, fh)
            fh.flush()
            try:
                self._command().run(["stack", "import", "--file", fh.name, "--stack", self.environment,
                                     "--color", "never"], stack.workspace.work_dir, self._env)
            except auto.errors.CommandError as err:
                raise StackFailed(f"stack {name}: cannot import its state into {self.location}: "
                                  f"{_last_error(str(err))}") from None

    def _pending_operations(self, name: str) -> list[Any]:
        """Pending operations in the stack's checkpoint, read from the file backend (no CLI start)."""
        return list(self._checkpoint(name).get("pending_operations") or [])

    def state_resources(self, name: str, *, pending: bool = True) -> list[dict[str, Any]]:
        """The resources stack ``name``'s state records, plus (``pending``) those of its pending operations (a
        create an interrupted run left pending may exist on the cluster: it is ours too); [] for a new stack.

        Read from the file backend's checkpoint, without a CLI start (``pulumi stack export`` would cost
        one per stack); a backend other than a folder would export instead.
        """
        latest = self._checkpoint(name)
        left = [op.get("resource") or {} for op in latest.get("pending_operations") or []] if pending else []
        return [*(latest.get("resources") or []), *left]

    def _checkpoint(self, name: str) -> dict[str, Any]:
        """The ``latest`` deployment of the stack's checkpoint ({} when the stack has none yet)."""
        import gzip
        import json

        if self.backend is not None:
            return self._exported(name)
        base = self.dir / "backend" / ".pulumi" / "stacks" / f"gpucluster-{name}"
        for path, opener in ((base / f"{self.environment}.json", open), (base / f"{self.environment}.json.gz",
                                                                          gzip.open)):
            if path.is_file():
                with opener(path, "rt") as fh:
                    doc = json.load(fh)
                return dict((doc.get("checkpoint") or {}).get("latest") or {})
        return {}


def redact(url: str) -> str:
    """``url`` without a user name or password in it (a backend URL may carry them; messages never do)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=f"****@{host}" + (f":{parts.port}" if parts.port else "")))


def backend_url(given: str | None) -> str | None:
    """The shared backend to use: ``--backend`` when given, else ``$PULUMI_BACKEND_URL``; None: this machine's
    state folder. Pulumi's own service (``https://...``) and any URL that is no backend are refused (exit 2)."""
    url = given if given is not None else os.environ.get("PULUMI_BACKEND_URL") or None
    if url is None:
        return None
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in BACKEND_SCHEMES:
        where = "--backend" if given is not None else "PULUMI_BACKEND_URL"
        raise InputError(f"{where} {redact(url)!r}: not a backend gpucluster can keep its stacks in; use one of "
                         + ", ".join(f"{s}://" for s in BACKEND_SCHEMES)
                         + " (Pulumi's DIY backends, which lock each stack while an update runs)")
    return url


#: The DIY backends of the Pulumi CLI (pkg/backend/diy: file, and the gocloud.dev blob drivers it links).
BACKEND_SCHEMES = ("s3", "gs", "azblob", "file")


def _interruptible(operation: Callable[[], Any]) -> Any:
    """Run ``operation`` (which drives a ``pulumi`` subprocess) so that Ctrl-C stops it cleanly.

    The operation runs in a worker thread; on Ctrl-C the engine subprocesses get SIGINT (a terminal
    sends it to them already, a signal to this process alone does not) and the engine is given time
    to cancel and save its state before KeyboardInterrupt propagates.
    """
    import signal
    import threading

    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["value"] = operation()
        except BaseException as err:  # re-raised in the calling thread
            result["error"] = err

    thread = threading.Thread(target=work, name="pulumi-operation", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except KeyboardInterrupt:
        from gpucluster import procs
        from gpucluster.poll import Deadline, poll

        engines = _engine_children()
        for pid in engines:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        # The engine cancels in-flight steps and writes its checkpoint; wait for it to be done with
        # the state before this process goes (a second Ctrl-C ends the wait).
        deadline = Deadline.after(120)
        thread.join(120)
        # identity() is None once a process is gone or a zombie (never reaped here: the engine's own
        # subprocess handling waits for it)
        poll(lambda: all(procs.identity(pid) is None for pid in engines), timeout=deadline, every=0.1)
        raise
    if "error" in result:
        raise result["error"]
    return result.get("value")


def _engine_children() -> list[int]:
    """Pids of ``pulumi`` processes started by this process."""
    me = str(os.getpid())
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            comm = fields[0].split("(", 1)[1]
            ppid = fields[1].split()[1]
        except (OSError, IndexError):
            continue
        if ppid == me and comm.startswith("pulumi"):
            found.append(int(stat.parent.name))
    return found


def _step(meta: Any) -> dict[str, Any] | None:
    """One preview step as plain data: operation, URN, type, and each changed input path with its kind
    (``add``/``update``/``delete``, ``-replace`` when it forces a replacement), old and new value; None for
    ``same`` and for steps that are not objects' (the stack, components, the provider)."""
    op = str(getattr(meta.op, "value", meta.op))
    if op in ("same", "read", "refresh", "discard") or not str(meta.type).startswith("kubernetes:"):
        return None
    old = (meta.old.inputs if meta.old is not None else None) or {}
    new = (meta.new.inputs if meta.new is not None else None) or {}
    fields = []
    for path, diff in sorted((meta.detailed_diff or {}).items()):
        kind = str(getattr(diff.diff_kind, "value", diff.diff_kind))
        fields.append({"path": path, "kind": kind, "old": _at_path(old, path), "new": _at_path(new, path)})
    return {"op": op, "urn": meta.urn, "type": meta.type, "name": meta.urn.rsplit("::", 1)[-1], "fields": fields}


def _at_path(value: Any, path: str) -> Any:
    """The value at a Pulumi property path (``spec.hard["requests.nvidia.com/gpu"]``, ``a.b[0]``); None if absent."""
    import re

    for part in re.findall(r'\["((?:[^"\\]|\\.)*)"\]|\[(\d+)\]|([^.\[\]]+)', path):
        key, index, word = part
        if isinstance(value, dict) and (key or word) in value:
            value = value[key or word]
        elif isinstance(value, list) and index and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    return value


#: Stands in for the history entry ``Stack.up``/``destroy`` insist on reading back (see ``run``).
_NO_HISTORY = object()


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()]
    if lines:
        return lines[-1][:800]
    return (text.strip().splitlines()[-1] if text.strip() else "an unknown point")[:800]


__all__ = ["PROVIDER_VERSION", "Counts", "Engine", "StackFailed", "find_binaries"]
