"""Making a new dev cluster: its record and dirs, ceph.conf, the mon (keyrings, monmap, mkfs),
the mgr, the OSDs (ids from the mon, keyrings, backing images or loop devices, mkfs in
parallel) and the pools the benchmarks use; and, for a cluster made before, attaching its loop
devices again. Daemons are started through the injected `DaemonPlacement`."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_health import ClusterHealth
from cephscope.deploy.cluster_layout import (
    MGR_ID,
    MON_ID,
    RGW_NAME,
    ClusterLayout,
    ClusterState,
    DevClusterError,
    OsdBacking,
)
from cephscope.deploy.daemon_supervisor import DaemonPlacement
from cephscope.deploy.devconf import ConfGateway, ConfNetwork, render_conf
from cephscope.deploy.loop_devices import LoopDeviceUser

BENCH_POOL = "cephscope-bench"
RBD_POOL = "rbd"
RBD_IMAGE = "cephscope-img"
RBD_IMAGE_SIZE_MIB = 2048
STATE_SUBDIRS = ("run", "log", "crash", "mon", "mgr", "osd", "blocks")


class ClusterBootstrap:
    """Creates the cluster laid out by `layout` with these collaborators."""

    def __init__(self, layout: ClusterLayout, commands: ClusterCommands, daemons: DaemonPlacement,
                 loops: LoopDeviceUser, health: ClusterHealth, log: Callable[[str], None]) -> None:
        self.layout = layout
        self.commands = commands
        self.daemons = daemons
        self.loops = loops
        self.health = health
        self._log = log

    def new_state(self, backing: str) -> ClusterState:
        """The dirs and the record of a new cluster, saved before anything starts (so that
        `down` after a failure finds what to undo)."""
        layout = self.layout
        for sub in STATE_SUBDIRS:
            (layout.state_dir / sub).mkdir(parents=True, exist_ok=True)
        state = ClusterState(
            fsid=str(uuid.uuid4()),
            port_base=layout.port_base,
            num_osds=layout.num_osds,
            backing=backing,
            device_class=layout.device_class,
            osd_size_gib=layout.osd_size_gib,
            hosts=layout.num_hosts,
            clients=layout.num_clients,
            release=layout.release.name,
            mds=layout.mds,
            rgw=layout.rgw,
        )
        state.save(layout.state_file)
        return state

    def create(self, state: ClusterState, with_the_mon: Callable[[], None] | None = None) -> None:
        """conf, mon, mgr, OSDs, pools (the host network, if any, is up already).
        `with_the_mon`: work that needs only the mon (the services' keys and pools), done while
        the mgr and the OSDs are made, which leave the mon mostly idle; its failure is raised."""
        t0 = time.monotonic()
        self.write_conf(state.fsid)
        self.bootstrap_mon(state.fsid)
        self._log(f"devcluster: mon up ({time.monotonic() - t0:.1f}s)")
        with ThreadPoolExecutor(max_workers=1) as beside:
            alongside = beside.submit(with_the_mon) if with_the_mon is not None else None
            self.bootstrap_mgr()
            self.create_osds(state)
            self._log(f"devcluster: {self.layout.num_osds} OSDs up on {state.backing} "
                      f"({time.monotonic() - t0:.1f}s)")
            self.create_pools()
            if alongside is not None:
                alongside.result()

    def write_conf(self, fsid: str) -> None:
        layout = self.layout
        network = None
        if layout.host_plan is not None:
            daemons = [f"mon.{MON_ID}", f"mgr.{MGR_ID}", *(f"osd.{i}" for i in range(layout.num_osds)),
                       *layout.service_names()]
            network = ConfNetwork(layout.host_plan.public_subnet, layout.host_plan.cluster_subnet,
                                  {d: layout.asok_dir_of(layout.host_of(d).name) for d in daemons})
        gateway = (ConfGateway(RGW_NAME, f"{layout.rgw_addr}:{layout.rgw_port}",
                               layout.release_spec_field("gateway_flags"))
                   if layout.rgw else None)
        layout.conf_path.write_text(render_conf(
            layout.state_dir, fsid, layout.mon_addr, layout.mon_port, layout.msgr_port_range,
            layout.osd_size_gib, network, mds=layout.mds, gateway=gateway))

    def bootstrap_mon(self, fsid: str) -> None:
        layout = self.layout
        run = self.commands.run
        mon_keyring = layout.state_dir / "mon.keyring.tmp"
        run(["ceph-authtool", "--create-keyring", str(mon_keyring), "--gen-key", "-n", "mon.",
             "--cap", "mon", "allow *"])
        run(["ceph-authtool", "--create-keyring", str(layout.admin_keyring), "--gen-key",
             "-n", "client.admin", "--cap", "mon", "allow *", "--cap", "osd", "allow *",
             "--cap", "mds", "allow *", "--cap", "mgr", "allow *",
             *layout.release_spec_field("admin_key_args")])
        run(["ceph-authtool", str(mon_keyring), "--import-keyring", str(layout.admin_keyring)])
        monmap = layout.state_dir / "monmap.tmp"
        run(["monmaptool", "--create", "--fsid", fsid, "--addv", MON_ID,
             f"[v2:{layout.mon_addr}:{layout.mon_port}]", *layout.release_spec_field("monmap_args"),
             str(monmap)])
        run(["ceph-mon", "-c", str(layout.conf_path), "--mkfs", "-i", MON_ID, "--monmap", str(monmap),
             "--keyring", str(mon_keyring)])
        monmap.unlink(missing_ok=True)
        mon_keyring.unlink(missing_ok=True)
        self.daemons.start(f"mon.{MON_ID}")

    def bootstrap_mgr(self) -> None:
        mgr_dir = self.layout.state_dir / "mgr" / f"ceph-{MGR_ID}"
        mgr_dir.mkdir(parents=True, exist_ok=True)
        self.commands.run(self.commands.ceph_cmd(
            "auth", "get-or-create", f"mgr.{MGR_ID}", "mon", "allow profile mgr", "osd", "allow *",
            "mds", "allow *", "-o", str(mgr_dir / "keyring")))
        self.daemons.start(f"mgr.{MGR_ID}")

    def create_osds(self, state: ClusterState) -> None:
        layout = self.layout
        run = self.commands.run
        osds: list[OsdBacking] = []
        for _ in range(layout.num_osds):
            osd_uuid = str(uuid.uuid4())
            secret = run(["ceph-authtool", "--gen-print-key"]).stdout.decode().strip()
            inbuf = json.dumps({"cephx_secret": secret}).encode()
            out = run(self.commands.ceph_cmd("osd", "new", osd_uuid, "-i", "-"), input_bytes=inbuf)
            osd_id = int(out.stdout.decode().strip())
            data = layout.osd_data(osd_id)
            data.mkdir(parents=True, exist_ok=True)
            run(["ceph-authtool", "--create-keyring", str(data / "keyring"), "--name", f"osd.{osd_id}",
                 "--add-key", secret])
            image = layout.osd_image(osd_id)
            loop_device = None
            if state.backing == "loop":
                with image.open("wb") as fh:
                    fh.truncate(layout.osd_size_gib << 30)
                loop_device = self.loops.attach(image)
            osds.append(OsdBacking(osd_id, str(image), loop_device))
            # Record each attachment at once so that a failure later can undo it.
            state.osds = list(osds)
            state.save(layout.state_file)
            (data / "fsid").write_text(osd_uuid + "\n")

        def mkfs(backing: OsdBacking) -> None:
            argv = ["ceph-osd", "-c", str(layout.conf_path), "-i", str(backing.osd_id), "--mkfs",
                    "--osd-uuid", (layout.osd_data(backing.osd_id) / "fsid").read_text().strip()]
            if backing.loop_device:
                argv += ["--bluestore-block-path", backing.loop_device]
            else:
                argv += ["--bluestore-block-path", backing.image, "--bluestore-block-create"]
            self.commands.run_on(self.daemons.host_of(f"osd.{backing.osd_id}"), argv, timeout=300)

        with ThreadPoolExecutor(max_workers=layout.num_osds) as pool:
            list(pool.map(mkfs, osds))
            list(pool.map(lambda b: self.daemons.start(f"osd.{b.osd_id}"), osds))
        self.health.wait_osds_up([o.osd_id for o in osds], timeout=90)
        if layout.device_class:
            ids = [f"osd.{o.osd_id}" for o in osds]
            with contextlib.suppress(DevClusterError):
                self.commands.ceph("osd", "crush", "rm-device-class", *ids)
            self.commands.ceph("osd", "crush", "set-device-class", layout.device_class, *ids)

    def create_pools(self) -> None:
        ceph = self.commands.ceph
        ceph("osd", "pool", "create", BENCH_POOL, "32", "32", "replicated")
        ceph("osd", "pool", "application", "enable", BENCH_POOL, "rados")
        ceph("osd", "pool", "create", RBD_POOL, "32", "32", "replicated")
        rbd = ["rbd", "-c", str(self.layout.conf_path)]
        self.commands.run([*rbd, "pool", "init", RBD_POOL])
        self.commands.run([*rbd, "create", "--size", str(RBD_IMAGE_SIZE_MIB), f"{RBD_POOL}/{RBD_IMAGE}"])

    def reattach_loops(self, state: ClusterState) -> None:
        """Attach a stopped cluster's loop devices again (recorded as each is attached)."""
        if state.backing != "loop":
            return
        for backing in state.osds:
            backing.loop_device = self.loops.attach(Path(backing.image))
            state.save(self.layout.state_file)
            # Loop numbers change between attachments: BlueStore follows the symlink.
            block = self.layout.osd_data(backing.osd_id) / "block"
            block.unlink(missing_ok=True)
            block.symlink_to(backing.loop_device)
