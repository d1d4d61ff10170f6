#!/usr/bin/env bash
# Build (once) the Debian bookworm systemd image Molecule boots, and import it into podman.
#
# No container registry is reachable, so the image is made with debootstrap from the Debian mirror
# this machine's apt already uses, then `podman import`ed. The rootfs tarball is cached under
# ${GPUCLUSTER_CACHE:-$HOME/.cache/gpucluster}/images/, keyed by a hash of this script's recipe, so
# re-runs (and a fresh podman store) reuse it. Idempotent: prints the image name and exits 0 when
# the image already exists.
#
# Usage: scripts/molecule-image.sh [--packages PKG,PKG...] [--print-name]
#   --packages: also install these Debian packages (an image per list: the site scenario's hosts start with
#               the packages its roles install, tests/molecule/site_image.py; the role scenarios install
#               them from bare hosts on every run).
set -euo pipefail

SUITE=bookworm
PACKAGES=python3,python3-apt,systemd,systemd-sysv,sudo,ca-certificates,dbus,apt-utils,gnupg,kmod,procps,iproute2
# Bump when the recipe changes in a way the hash below cannot see.
RECIPE_VERSION=3

extra="" print_name=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --packages)
      if [[ $# -lt 2 || -z "$2" ]]; then echo "molecule-image: --packages needs a comma-separated list" >&2; exit 2; fi
      extra="$2"; shift 2 ;;
    --print-name) print_name=1; shift ;;
    *) echo "molecule-image: unknown argument $1 (usage: $0 [--packages PKG,PKG...] [--print-name])" >&2; exit 2 ;;
  esac
done
if [[ -n "$extra" && ! "$extra" =~ ^[a-z0-9][a-z0-9+.,-]*$ ]]; then
  echo "molecule-image: --packages takes Debian package names separated by commas, got: $extra" >&2
  exit 2
fi

here="$(cd "$(dirname "$0")/.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/molecule/containers.conf}"
cache="${GPUCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpucluster}/images"
key="$(printf '%s|%s|%s' "$SUITE" "$PACKAGES" "$RECIPE_VERSION" | sha256sum | cut -c1-12)"
if [[ -n "$extra" ]]; then  # the base image's key stays what it was: its cached tarball is reused as is
  key="$(printf '%s|%s' "$key" "$extra" | sha256sum | cut -c1-12)"
  PACKAGES="$PACKAGES,$extra"
fi
name="localhost/gpucluster-debian12:${key}"

if [[ "$print_name" == 1 ]]; then
  echo "$name"
  exit 0
fi

if podman image exists "$name"; then
  echo "$name"
  exit 0
fi

# The mirror: the first Debian URI in this machine's apt sources (deb822 or one-line format).
mirror="${GPUCLUSTER_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  shopt -s nullglob
  sources=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  mirror="$( (cat "${sources[@]}" 2>/dev/null || true) \
    | sed -nE 's#^(deb[[:space:]]+(\[[^]]*\][[:space:]]+)?|URIs:[[:space:]]*)([a-z]+://[^[:space:]]+/debian)/?([[:space:]].*)?$#\3#p' \
    | head -n1)"
fi
if [[ -z "$mirror" ]]; then
  echo "molecule-image: no Debian mirror found in /etc/apt/sources.list*; set GPUCLUSTER_DEBIAN_MIRROR" >&2
  exit 2
fi

tarball="$cache/debian12-${key}.tar"
if [[ ! -s "$tarball" ]]; then
  for tool in debootstrap podman; do
    command -v "$tool" >/dev/null || { echo "molecule-image: $tool is missing (apt-get install -y podman debootstrap)" >&2; exit 2; }
  done
  mkdir -p "$cache"
  work="$(mktemp -d "$cache/.build.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  echo "molecule-image: debootstrap $SUITE from $mirror (about a minute)" >&2
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  # Smaller image, and no stale package lists: roles run apt-get update themselves.
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  # Disposable test hosts: dpkg need not fsync every file, and skips docs, man pages and translations
  # (the roles' outcomes live in /etc, /usr/bin and systemd). Package installs get about twice as fast.
  printf '%s\n' force-unsafe-io >"$work/rootfs/etc/dpkg/dpkg.cfg.d/gpucluster-test-image"
  printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/locale/*' \
    'path-exclude=/usr/share/info/*' >>"$work/rootfs/etc/dpkg/dpkg.cfg.d/gpucluster-test-image"
  printf '%s\n' 'Acquire::Languages "none";' >"$work/rootfs/etc/apt/apt.conf.d/90gpucluster-test-image"
  # No machine id in the image: each container gets its own at boot (systemd takes podman's container
  # uuid), as every real host has its own. A shared one gives every container the same MAC address once
  # udev runs at boot (MACAddressPolicy=persistent derives it from the machine id and the interface name),
  # and the hosts no longer reach each other.
  : >"$work/rootfs/etc/machine-id"
  rm -f "$work/rootfs/var/lib/dbus/machine-id"
  # Units that cannot work in a container and only slow boot or fail.
  for unit in systemd-remount-fs.service getty@tty1.service; do
    ln -sf /dev/null "$work/rootfs/etc/systemd/system/$unit"
  done
  tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$tarball"   # same filesystem: atomic
fi

podman import --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL=SIGRTMIN+3' "$tarball" "$name" >/dev/null 2>&1
echo "$name"
