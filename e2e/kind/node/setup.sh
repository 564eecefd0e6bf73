#!/bin/bash
# Runs once inside the Debian base while its image is built (Dockerfile RUN): shapes it into a node.
set -euo pipefail
# Units a container has no use for (consoles, udev, time sync, ...).
for u in getty.target console-getty.service systemd-udevd.service systemd-udev-trigger.service \
	systemd-modules-load.service systemd-remount-fs.service systemd-timesyncd.service \
	systemd-networkd.service systemd-resolved.service apt-daily.timer apt-daily-upgrade.timer \
	e2scrub_all.timer e2scrub_reap.service fstrim.timer dpkg-db-backup.timer \
	systemd-logind.service sys-kernel-config.mount sys-kernel-debug.mount sys-fs-fuse-connections.mount; do
	systemctl mask "$u" >/dev/null 2>&1 || true
done
systemctl enable containerd.service kubelet.service >/dev/null 2>&1
# The journal: memory only, no kernel log.
mkdir -p /etc/systemd/journald.conf.d
printf '[Journal]\nStorage=volatile\nReadKMsg=no\n' >/etc/systemd/journald.conf.d/herald-kind.conf
# Where kubeadm, kind and the CNI plugins expect things.
mkdir -p /opt/cni /etc/cni/net.d /kind /etc/kubernetes/manifests /var/lib/kubelet
ln -sfn /usr/lib/cni /opt/cni/bin
ln -sfn /usr/bin/containerd /usr/local/bin/containerd
: >/etc/machine-id
rm -rf /var/cache/apt/archives/*.deb /var/lib/apt/lists/*
