"""container_runtime outcome: containerd running with our drop-in merged into its live config.

converge.yml runs the role with max_container_log_line_size 16384, then the real `nvidia-ctk runtime
configure` (which copies the whole CRI section into its own 99-nvidia.toml), then the role with 32768:
containerd must run with 32768 and with the toolkit's own NVIDIA runtime.
"""

import tomllib

import pytest

testinfra_hosts = ["podman://gpuc-container-runtime"]


@pytest.fixture(scope="module")
def live_config(host):
    """What containerd itself reports as its merged configuration."""
    return tomllib.loads(host.check_output("containerd config dump"))


def cri(config):
    return config["plugins"]["io.containerd.grpc.v1.cri"]


def test_containerd_running(host):
    svc = host.service("containerd")
    assert svc.is_running and svc.is_enabled


def test_main_config_only_imports(host):
    main = host.file("/etc/containerd/config.toml").content_string
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in main
    assert "nvidia" not in main, "the NVIDIA runtime must live in a drop-in, not in config.toml"


def test_systemd_cgroup(live_config):
    assert cri(live_config)["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True


def test_nvidia_runtime_registered(live_config):
    runtimes = cri(live_config)["containerd"]["runtimes"]
    # The toolkit's drop-in loads after ours and names its own runtime binary: the re-merge keeps it.
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/local/nvidia/toolkit/nvidia-container-runtime"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert cri(live_config)["containerd"]["default_runtime_name"] == "runc"


def test_sandbox_image(live_config):
    assert cri(live_config)["sandbox_image"] == "registry.k8s.io/pause:3.10.2"


def test_a_cri_setting_changed_after_the_toolkit_reaches_containerd(host, live_config):
    # The toolkit froze the first value in its copy of the CRI section (the fault without the re-merge) ...
    as_written = tomllib.loads(host.file("/root/99-nvidia.as-written.toml").content_string)
    assert cri(as_written)["max_container_log_line_size"] == 16384
    # ... and the running containerd has the value the role set afterwards.
    assert cri(live_config)["max_container_log_line_size"] == 32768


def test_cri_socket_serves(host):
    # ctr talks to the running daemon: proves containerd started with the merged config.
    assert host.run("ctr --address /run/containerd/containerd.sock version").rc == 0
