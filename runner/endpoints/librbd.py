"""The `librbd` driver: an RBD image per endpoint and client, reached by fio's rbd engine
(librbd inside fio; nothing is mapped or mounted)."""

from __future__ import annotations

from typing import ClassVar

from cephscope.runner.endpoints.base import Client, Driver, Endpoint, EndpointSite
from cephscope.runner.endpoints.rbd import RbdImages


def step_images(site: EndpointSite) -> RbdImages:
    spec, ctx = site.spec, site.ctx
    return RbdImages(ctx, ctx.pool, spec.endpoint_size_mib, spec.order, ctx.data_pool,
                     spec.disabled_features)


class LibrbdDriver(Driver):
    name: ClassVar[str] = "librbd"

    def __init__(self, site: EndpointSite) -> None:
        super().__init__(site)
        self.images = step_images(site)

    def create(self) -> None:
        for client in self.site.clients:
            for index in range(self.site.spec.endpoints_per_client):
                self.images.create(self.site.image_name(client, index))

    def endpoints(self, client: Client) -> list[Endpoint]:
        return [Endpoint(client, i, "rbd", pool=self.images.pool,
                         image=self.site.image_name(client, i))
                for i in range(self.site.spec.endpoints_per_client)]

    def remove(self) -> list[str]:
        return self.images.remove_all()
