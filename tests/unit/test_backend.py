"""Which backends the stacks may use, and what a shared one needs before anything runs (issue 29, item 1).

The shared backend itself (a real S3 server, two runners, the lock, another passphrase) is
tests/integration/test_shared_backend.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.errors import InputError
from gpucluster.pulumi.engine import Engine, backend_url, redact

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        monkeypatch.delenv(name, raising=False)


def test_no_backend_keeps_the_state_in_its_folder(monkeypatch):
    assert backend_url(None) is None
    monkeypatch.setenv("PULUMI_BACKEND_URL", "")
    assert backend_url(None) is None


@pytest.mark.parametrize("url", ["s3://b?region=eu-west-1", "gs://b", "azblob://c", "file:///srv/state"])
def test_the_diy_backends_are_taken_from_the_flag_or_the_environment(monkeypatch, url):
    assert backend_url(url) == url
    monkeypatch.setenv("PULUMI_BACKEND_URL", url)
    assert backend_url(None) == url
    assert backend_url("s3://given") == "s3://given"  # the flag wins


@pytest.mark.parametrize("url, where", [("https://api.pulumi.com", "--backend"), ("bucket-name", "--backend"),
                                        ("ftp://user:secret@host/x", "--backend")])
def test_anything_else_is_refused_naming_where_it_came_from_and_hiding_credentials(url, where):
    with pytest.raises(InputError) as err:
        backend_url(url)
    assert str(err.value).startswith(where) and "s3://, gs://, azblob://, file://" in str(err.value)
    assert "secret" not in str(err.value)


def test_redact_hides_user_and_password_only():
    assert redact("s3://bucket?region=x") == "s3://bucket?region=x"
    assert redact("azblob://user:pw@acct:9000/c?x=1") == "azblob://****@acct:9000/c?x=1"


def test_a_shared_backend_without_a_passphrase_stops_before_any_engine(tmp_path):
    engine = Engine(tmp_path / "state", "prod", "s3://bucket")
    with pytest.raises(InputError, match="set PULUMI_CONFIG_PASSPHRASE"):
        engine.setup()
    assert not (tmp_path / "state" / "passphrase").exists()  # none generated for a shared backend


def test_the_passphrase_file_is_read(tmp_path, monkeypatch):
    (tmp_path / "pw").write_text("from-a-file\n")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "pw"))
    assert Engine(tmp_path / "state", "prod", "s3://bucket")._passphrase() == "from-a-file"
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "missing"))
    with pytest.raises(InputError, match="PULUMI_CONFIG_PASSPHRASE_FILE"):
        Engine(tmp_path / "state", "prod", "s3://bucket")._passphrase()


def test_the_local_world_refuses_a_shared_backend(cli, tmp_path, monkeypatch):
    result = cli("up", "-i", REPO / "inventories" / "local", "--world-dir", tmp_path / "w", "--backend", "s3://b")
    assert result.exit_code == 2, result
    assert "the local world keeps its stack state in its own folder" in result.stderr
    assert not (tmp_path / "w").exists()
    monkeypatch.setenv("PULUMI_BACKEND_URL", "s3://b")
    assert cli("plan", "-i", REPO / "inventories" / "local", "--world-dir", tmp_path / "w").exit_code == 2
