"""The CLI's promises to the operator (issue 30, items 5 and 6; docs/output.md).

- ``-o json``: one JSON document on stdout on success *and* on error, for every command that has it;
  ``validate`` has one schema whatever the outcome; other errors are the one error document.
- An API server that cannot be reached is one line naming it, the kubeconfig and the context.
- ``doctor``: 1 "found a problem", 4 "could not look".
- ``$GPUCLUSTER_INVENTORY`` is ``-i``'s default; commands that change a cluster say first what they
  act on; the local world's spec is refused on a kubeconfig that is not the local world's; a stack
  state folder belongs to one inventory.

Every "cannot reach the API" case uses a loopback port nothing listens on: no control plane.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import click
import pytest
import yaml

from gpucluster.cli import entrypoint
from gpucluster.cli.main import main

REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "inventories" / "local"
LAB = REPO / "inventories" / "lab"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig(tmp_path: Path, context: str = "prod", port: int | None = None) -> tuple[Path, str]:
    """A kubeconfig whose one context points at a closed loopback port; returns it and the server URL."""
    server = f"https://127.0.0.1:{port or closed_port()}"
    path = tmp_path / f"{context}.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "contexts": [{"name": context, "context": {"cluster": context, "user": "u"}}],
        "clusters": [{"name": context, "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return path, server


def run(capsys, *args: object) -> tuple[int, str, str]:
    rc = entrypoint([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_document(stdout: str) -> dict:
    """stdout holds exactly one JSON document (json.loads refuses two, or text around one)."""
    doc = json.loads(stdout)
    assert isinstance(doc, dict | list)
    return doc  # type: ignore[return-value]


@pytest.fixture(autouse=True)
def _no_inventory_env(monkeypatch):
    monkeypatch.delenv("GPUCLUSTER_INVENTORY", raising=False)


# -- -o json: one document, success and error ---------------------------------------------------

#: What each command with -o json needs besides -i and -o to get as far as loading the spec. A command
#: that gains -o json without an entry here fails test_every_json_command_is_covered.
NEEDS = {
    "validate": [], "render": ["--out-dir", "{tmp}/bundle"], "up": [], "down": ["--yes"],
    "verify": [], "doctor pod": ["ns/pod"], "doctor pending": ["-n", "ns"], "drain": ["n1"],
    "cost": ["--snapshot", "{tmp}/none.csv"], "drift": [], "plan": [],
    "backup stacks": ["--out", "{tmp}/b.json"], "restore stacks": ["--from", "{tmp}/b.json"],
    "backup etcd": ["--out", "{tmp}/e.db"], "restore etcd": ["--from", "{tmp}/e.db", "--yes"],
    "node remove": ["n1", "--yes"],
}
#: Commands with -o json that read no inventory (their errors are covered by the usage-error test).
NO_INVENTORY = {"catalog", "init", "images build", "local status", "tools list"}


def json_commands(group: click.Group = main, prefix: str = "") -> list[str]:
    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += json_commands(command, f"{prefix}{name} ")
        elif any(p.name == "output" and "json" in getattr(p.type, "choices", ()) for p in command.params):
            found.append(prefix + name)
    return found


def test_every_json_command_is_covered():
    assert sorted(json_commands()) == sorted({*NEEDS, *NO_INVENTORY})


@pytest.mark.parametrize("command", sorted(NEEDS))
def test_a_missing_inventory_is_one_json_document_and_exit_2(command, tmp_path, capsys):
    extra = [a.replace("{tmp}", str(tmp_path)) for a in NEEDS[command]]
    rc, out, err = run(capsys, *command.split(), *extra, "-i", tmp_path / "nowhere", "-o", "json")
    doc = one_document(out)
    assert rc == 2
    message = doc["error"]["message"] if command != "validate" else doc["problems"][0]["message"]
    assert "nowhere" in message and "no such file" in message
    if command != "validate":
        kind = "PhaseFailed" if command in ("up", "down", "plan") else "InputError"  # up/down/plan name the phase
        assert doc["command"] == command and doc["error"]["exitCode"] == 2 and doc["error"]["kind"] == kind
    assert "no such file" in err  # the message for people stays on stderr


def test_validate_has_one_schema_for_valid_invalid_and_missing(tmp_path, capsys):
    rc_ok, ok, _ = run(capsys, "validate", "-i", LAB, "-o", "json")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "cluster.yaml").write_text((LAB / "cluster.yaml").read_text().replace("name: lab", "name: Lab_Bad", 1))
    rc_bad, invalid, _ = run(capsys, "validate", "-i", bad, "-o", "json")
    (bad / "cluster.yaml").write_text("metadata: [unclosed\n")
    rc_yaml, broken, _ = run(capsys, "validate", "-i", bad, "-o", "json")
    rc_none, missing, _ = run(capsys, "validate", "-i", tmp_path / "nowhere", "-o", "json")
    docs = [one_document(d) for d in (ok, invalid, broken, missing)]
    assert (rc_ok, rc_bad, rc_yaml, rc_none) == (0, 2, 2, 2)
    assert all(d.keys() == docs[0].keys() for d in docs), [sorted(d) for d in docs]
    assert docs[0]["valid"] is True and docs[0]["cluster"] == "lab" and docs[0]["errors"] == 0
    assert all(d["valid"] is False and d["cluster"] is None and d["errors"] >= 1 for d in docs[1:])
    assert any(p["path"] == "metadata.name" for p in docs[1]["problems"])


def test_a_usage_error_is_the_error_document(capsys):
    rc, out, _ = run(capsys, "render", "-i", LAB, "-o", "json")  # no --out-dir
    doc = one_document(out)
    assert rc == 2 and doc["command"] == "render" and doc["error"]["kind"] == "UsageError"
    assert "--out-dir" in doc["error"]["message"]


def test_text_output_prints_no_json_on_error(tmp_path, capsys):
    rc, out, err = run(capsys, "verify", "-i", tmp_path / "nowhere")
    assert rc == 2 and out == "" and "no such file" in err


def test_a_document_already_printed_is_not_followed_by_an_error_document(tmp_path, capsys):
    # validate printed its own document for the invalid spec, then exits 2: still one document.
    rc, out, _ = run(capsys, "validate", "-i", tmp_path / "nowhere", "-o", "json")
    assert rc == 2 and "error" not in one_document(out)


# -- an unreachable API server -------------------------------------------------------------------

def test_an_unreachable_api_is_one_line_naming_server_kubeconfig_and_context(tmp_path, capsys):
    config, server = kubeconfig(tmp_path, "prod-admin")
    rc, out, err = run(capsys, "verify", "-i", LAB, "--kubeconfig", config, "-o", "json")
    doc = one_document(out)
    message = doc["error"]["message"]
    assert rc == 1 and doc["command"] == "verify" and doc["error"]["kind"] == "ClusterUnreachable"
    assert f"cannot reach the API server at {server} (kubeconfig {config}, context prod-admin): " \
           "connection refused" in message
    assert "\n" not in message and "ConnectionPool" not in message and "Max retries" not in message
    assert "ConnectionPool" not in err and "Traceback" not in err


def test_doctor_could_not_look_is_exit_4_and_blocked_stays_1(tmp_path, capsys):
    # Exit 1 ("found a problem") for a blocked pod is proven against a fake API in test_doctor.py; here
    # the API cannot be read at all, which must not look like a diagnosis.
    config, server = kubeconfig(tmp_path)
    rc_json, out, _ = run(capsys, "doctor", "pod", "ml/train-0", "-i", LAB, "--kubeconfig", config, "-o", "json")
    rc_text, text, err = run(capsys, "doctor", "pending", "-n", "ml", "-i", LAB, "--kubeconfig", config)
    doc = one_document(out)
    assert (rc_json, rc_text) == (4, 4)
    assert doc["command"] == "doctor pod" and doc["error"]["kind"] == "CouldNotLook" and doc["error"]["exitCode"] == 4
    assert "could not look" in doc["error"]["message"] and server in doc["error"]["message"]
    assert text == "" and "could not look" in err and server in err


# -- -o values agree ------------------------------------------------------------------------------

def test_cost_takes_text_and_keeps_table_as_its_alias(tmp_path, capsys):
    snap = tmp_path / "worked.csv"
    snap.write_text("start,end,namespace,model,allocatedGpus,activity\n"
                    "2026-11-01T00:00:00Z,2026-11-02T00:00:00Z,ml-research,H100-SXM5-80GB,4,0.35\n")
    rc_text, text, _ = run(capsys, "cost", "-i", LOCAL, "--snapshot", snap, "-o", "text")
    rc_table, table, _ = run(capsys, "cost", "-i", LOCAL, "--snapshot", snap, "-o", "table")
    rc_default, default, _ = run(capsys, "cost", "-i", LOCAL, "--snapshot", snap)
    assert (rc_text, rc_table, rc_default) == (0, 0, 0)
    assert text == table == default and "ml-research" in text


def test_every_output_option_offers_text_or_is_a_data_format():
    # `text` is the human format everywhere; no command names it otherwise (cost's `table` is an alias).
    for path in json_commands():
        command: click.Command = main
        for part in path.split():
            command = command.commands[part]  # type: ignore[attr-defined]
        output = next(p for p in command.params if p.name == "output")
        assert output.default == "text" and "text" in output.type.choices, path  # type: ignore[attr-defined]


# -- say what you act on ----------------------------------------------------------------------------

def test_gpucluster_inventory_is_the_default_and_i_wins(monkeypatch, capsys):
    monkeypatch.setenv("GPUCLUSTER_INVENTORY", str(LAB))
    _, from_env, _ = run(capsys, "validate", "-o", "json")
    _, given, _ = run(capsys, "validate", "-i", LOCAL, "-o", "json")
    assert one_document(from_env)["cluster"] == "lab"
    assert one_document(given)["cluster"] == "local"


@pytest.mark.parametrize("command", [
    ["up"], ["down", "--yes"], ["drain", "n1"], ["uncordon", "n1"], ["quarantine", "n1", "gpu-0", "--reason", "x"],
])
def test_the_local_default_is_refused_on_another_clusters_kubeconfig(command, tmp_path, capsys):
    config, server = kubeconfig(tmp_path, "prod")
    rc, _, err = run(capsys, *command, "--kubeconfig", config)
    assert rc == 2
    assert "no -i and no $GPUCLUSTER_INVENTORY" in err and f"kubeconfig {config} (context prod, API server " \
        f"{server})" in err and "not the local world's" in err and "nothing was changed" in err
    assert "cannot reach" not in err  # refused before any call


def test_the_local_worlds_own_kubeconfig_is_accepted(tmp_path, capsys):
    # The same command with a kubeconfig of the local world's context goes on (and finds no server).
    config, server = kubeconfig(tmp_path, "gpucluster-local")
    rc, _, err = run(capsys, "drain", "n1", "--kubeconfig", config)
    assert rc == 1 and "not the local world's" not in err and f"cannot reach the API server at {server}" in err


def test_a_command_that_changes_a_cluster_says_what_it_acts_on_first(tmp_path, capsys, monkeypatch):
    config, server = kubeconfig(tmp_path, "prod-admin")
    monkeypatch.setenv("GPUCLUSTER_INVENTORY", str(LAB))
    rc, out, err = run(capsys, "drain", "n1", "--kubeconfig", config, "-o", "json")
    first = err.splitlines()[0]
    assert rc == 1 and one_document(out)["error"]["kind"] == "ClusterUnreachable"
    assert first == (f"gpucluster drain: inventory {LAB} (from $GPUCLUSTER_INVENTORY), cluster lab; API server "
                     f"{server}, kubeconfig {config}, context prod-admin")


def test_two_inventories_with_one_name_do_not_share_stack_state(tmp_path, capsys):
    first, second, state = tmp_path / "a", tmp_path / "b", tmp_path / "state"
    shutil.copytree(LAB, first)
    shutil.copytree(LAB, second)
    from gpucluster import inventory as inventories
    from gpucluster import ownership
    from gpucluster.flow import STACK_STATE

    ownership.claim(state, STACK_STATE)  # as `up` does before binding it
    inventories.bind_state(state, first, "lab")
    inventories.bind_state(state, first, "lab")  # the same inventory again: fine
    rc, out, err = run(capsys, "down", "-i", second, "--state-dir", state, "--yes", "-o", "json")
    doc = one_document(out)
    assert rc == 2 and doc["error"]["kind"] == "InputError"
    assert f"belongs to the inventory {first.resolve()}, not to {second.resolve()}" in doc["error"]["message"]
    assert err.startswith(f"gpucluster down: inventory {second}, cluster lab; ")
    assert json.loads((state / inventories.STATE_INVENTORY).read_text())["inventory"] == str(first.resolve())


def test_warnings_among_spec_errors_are_labelled_and_not_counted_as_errors():
    from gpucluster.errors import Problem, SpecError

    err = SpecError("cluster.yaml", [Problem("dra.deviceClasses[0]", "matches no device", severity="warning"),
                                     Problem("metadata.name", "not a DNS-1123 name")])
    assert str(err).splitlines() == ["cluster.yaml: 1 error in the cluster spec (and 1 warning)",
                                     "  - metadata.name: not a DNS-1123 name",
                                     "  - warning: dra.deviceClasses[0]: matches no device"]


@pytest.mark.parametrize(("reason", "said"), [
    # what urllib3 wraps in MaxRetryError.reason for each way a connection fails
    (lambda u: u.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused"),
     "connection refused"),
    (lambda u: u.ConnectTimeoutError(None, "Connection to 10.0.0.1 timed out. (connect timeout=5)"), "timed out"),
    (lambda u: u.SSLError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate "
                          "(_ssl.c:1006)"), "TLS failed: certificate verify failed: self-signed certificate"),
    (lambda u: u.NameResolutionError("api.example", None, OSError("[Errno -2] Name or service not known")),
     "name or service not known"),
])
def test_the_cause_of_an_unreachable_server_is_a_few_words(reason, said):
    import urllib3

    from gpucluster.kube import why_unreachable

    assert why_unreachable(urllib3.exceptions.MaxRetryError(None, "/api", reason(urllib3.exceptions))) == said


def test_up_names_the_admin_kubeconfig_it_will_fetch_into_the_state_dir(tmp_path):
    from gpucluster.cli import target
    from gpucluster.spec import load_spec

    acting = target.of(load_spec(LAB), LAB, None, None, state_dir=tmp_path / "state", fetched_later=True)
    assert acting.kubeconfig == (f"{tmp_path / 'state' / 'admin.conf'} (not there yet: the host layer fetches it "
                                 "from the init host)")
    assert acting.server == "(from the admin kubeconfig, once fetched)"
