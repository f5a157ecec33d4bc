"""The `rbd-fuse` driver: an RBD image per endpoint and client, exposed as a file by its own
`rbd-fuse` mount on the client (`-r IMAGE`: that image alone); fio works on the file.

rbd-fuse 16.2 rebuilds its image list on every open and walks it unlocked, so two opens at
once race (one gets ENOENT): each endpoint takes one fio job (see the fio benchmark's checks),
and every endpoint has a mount (an rbd-fuse process) of its own.
"""

from __future__ import annotations

from typing import ClassVar

from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.endpoints.base import Client, Driver, Endpoint, EndpointSite
from cephscope.runner.endpoints.librbd import step_images
from cephscope.runner.endpoints.mounts import mount, unmount_all


def rbd_fuse_argv(conf: str, pool: str, image: str, mountpoint: str) -> list[str]:
    return ["rbd-fuse", "-c", conf, "-p", pool, "-r", image, mountpoint]


class RbdFuseDriver(Driver):
    name: ClassVar[str] = "rbd-fuse"

    def __init__(self, site: EndpointSite) -> None:
        super().__init__(site)
        self.images = step_images(site)
        self.mounts: list[tuple[Client, str]] = []

    def create(self) -> None:
        site = self.site
        for client in site.clients:
            for index in range(site.spec.endpoints_per_client):
                self.images.create(site.image_name(client, index))
        conf = str(site.ctx.cluster.conf_path)
        for client in site.clients:
            for index in range(site.spec.endpoints_per_client):
                path = site.mountpoint(client, index)
                image = site.image_name(client, index)
                self.mounts.append((client, path))
                mount(site, client, path, rbd_fuse_argv(conf, self.images.pool, image, path),
                      env=self.env())
                # rbd-fuse connects to the cluster only once mounted: its image must show
                shown = f"{path}/{image}"
                if client.exec().run(["test", "-f", shown], timeout=60, check=False
                                     ).returncode != 0:
                    raise BenchmarkError(f"rbd-fuse on {client.name} mounted {path} but does "
                                         f"not show {image} (could it reach the cluster?)")

    def endpoints(self, client: Client) -> list[Endpoint]:
        site = self.site
        return [Endpoint(client, i, "file", pool=self.images.pool,
                         image=site.image_name(client, i),
                         path=f"{site.mountpoint(client, i)}/{site.image_name(client, i)}")
                for i in range(site.spec.endpoints_per_client)]

    def remove(self) -> list[str]:
        # unmounted first: an image open in rbd-fuse would not be removed
        problems = unmount_all(self.site, self.mounts)
        self.mounts = []
        return problems + self.images.remove_all()
