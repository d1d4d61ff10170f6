"""nvidia_container_toolkit outcome: the real toolkit binaries installed and configured for CDI."""

testinfra_hosts = ["podman://gpuc-nvidia-ctk"]


def test_binaries_installed(host):
    for name in ("nvidia-ctk", "nvidia-container-runtime", "nvidia-cdi-hook"):
        f = host.file(f"/usr/bin/{name}")
        assert f.is_file and f.mode == 0o755, name


def test_pinned_version(host):
    assert "version 1.18.0" in host.check_output("nvidia-ctk --version")


def test_runtime_config_cdi_mode(host):
    conf = host.file("/etc/nvidia-container-runtime/config.toml").content_string
    assert 'mode = "cdi"' in conf
    # The toolkit itself must accept our config: nvidia-ctk reads it and prints the effective mode.
    out = host.check_output("nvidia-ctk config --config-file /etc/nvidia-container-runtime/config.toml")
    assert 'mode = "cdi"' in out


def test_no_cdi_spec_without_device(host):
    # No GPU in the container: the spec must not be invented.
    assert not host.file("/dev/nvidiactl").exists
    assert not host.file("/etc/cdi/nvidia.yaml").exists
