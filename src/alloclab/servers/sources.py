"""What the studies' stack is made from: vendored files alone (../shared/vendor of the checkout,
ALLOCLAB_VENDOR, or the cache), each checked against its SHA-256."""

from __future__ import annotations

from alloclab.catalog.tidesql import BUILDS, DEFAULT_BUILD, Build
from alloclab.host.vendor import Vendored
from alloclab.servers.root import MARIADB_VERSION

# TideSQL and TidesDB release archives (`git archive` of each tag; ../shared/vendor/README.md)
TIDESQL_ARCHIVES = {
    "4.5.5": Vendored("tidesql-4.5.5.tar.gz", "3130e633ff308ef87366e83a07037a22011a88c9e1ea400d61661090c75789b9"),
    "4.2.5": Vendored("tidesql-4.2.5.tar.gz", "1c582ef8b136a1d98b5cd1273b0542b2e2175287a0b599d437cac3a121c15548"),
    "4.2.4": Vendored("tidesql-4.2.4.tar.gz", "b4d1fd6fa03d2ee54b5fe73e1382de8b12dcd5fb8d16a38003f160af77ddbddf"),
}
TIDESDB_ARCHIVES = {
    "9.3.14": Vendored("tidesdb-9.3.14.tar.gz", "b16717d686ddc6920ddf204683f782b2ceb02f182d709037f0b6c80d566bedc3"),
    "9.2.5": Vendored("tidesdb-9.2.5.tar.gz", "66b242cfa6fbbee6ed05e53220ed745480ffda4835ad84560bb6d27f16428d81"),
    "9.0.9": Vendored("tidesdb-9.0.9.tar.gz", "7865b259ebdbac96689b66046a8a9fd35602dbbccf9aa58fc74eb51d99c5e950"),
    "9.0.8": Vendored("tidesdb-9.0.8.tar.gz", "8471d378a8a258c3ee7977e59cb069997e3320bf0c5bc6e0384ca78b9e7950d2"),
}
# Debian's MariaDB 11.8.6 for trixie, the seeds' server (../shared/vendor/mariadb-11.8.6/)
MARIADB_DEBS = [Vendored(f"mariadb-{MARIADB_VERSION}/{f}", h) for f, h in (
    ("libmariadb-dev_11.8.6-0+deb13u1_amd64.deb", "f980a7ab01598d5129256c55cf24479153f8bd2274a9fa96c3bcfb8d2d57e852"),
    ("libmariadb3_11.8.6-0+deb13u1_amd64.deb", "b2a2d1cdf7493c75d43916a18947700740964513ff5ff603cf5cbbf61e9e6385"),
    ("libmariadbd-dev_11.8.6-0+deb13u1_amd64.deb", "384734221b7bfd59ae0412bfd239465f6281118b4c9e7bc9a341fc44ab4ede82"),
    ("libmariadbd19t64_11.8.6-0+deb13u1_amd64.deb", "b13e8c0fbb8bc1935d744b18a7d78193a27695bfc21e4582018a27f23e8a2475"),
    ("mariadb-client-core_11.8.6-0+deb13u1_amd64.deb",
     "d9dc20e0769be8ec54b9bdd64667c047cf5e0933a0c873626a4ac1cb2be7c300"),
    ("mariadb-client_11.8.6-0+deb13u1_amd64.deb", "1ce40c794aa660d6bb57b0b6ab8903367b68a010abc766fd03202251ee836c9b"),
    ("mariadb-common_11.8.6-0+deb13u1_all.deb", "b5116ff56a60d471332d45bfd4ec50391fdcf5a40747bf7fe23ec8551cb71f9c"),
    ("mariadb-plugin-rocksdb_11.8.6-0+deb13u1_amd64.deb",
     "7397a9b8b80b9f68e84ce6e8a5c027604da6c9943b4090e0650473b97d0c665d"),
    ("mariadb-server-core_11.8.6-0+deb13u1_amd64.deb",
     "07a333e34773e1e1bc7c5613878c70a1224180f452481dcf786be05711148178"),
    ("mariadb-server_11.8.6-0+deb13u1_amd64.deb", "b62235159df3ad6dd4e82b1ff586e76a395063def855ea341252584ab61fb1b0"),
)]
# the server headers a storage-engine plugin compiles against, which no Debian package ships
PLUGIN_HEADERS = Vendored("mariadb-11.8.6-plugin-headers.tar.xz",
                          "862e0982113d9214b49977948dd4aebbf9470734b4a1478e049d10fa5d11a6b0")


def vendored_for(b: Build | None = None) -> list[Vendored]:
    """Every vendored file the stack (and a build of TideSQL) needs."""
    b = b or BUILDS[DEFAULT_BUILD]
    return [*MARIADB_DEBS, PLUGIN_HEADERS, TIDESQL_ARCHIVES[b.tidesql], TIDESDB_ARCHIVES[b.tidesdb]]
