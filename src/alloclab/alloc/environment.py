"""One environment policy for every process alloclab starts.

- The process under test gets the caller's environment cleaned of any preload and of every
  allocator tuning variable, then exactly its allocator's preload and tuning
  (`Allocator.target_env`, through `under_test`).
- Everything else alloclab starts (clients, loaders, dataset preparation, servers that prepare
  golden data) gets the cleaned environment (`clean`): a stray `LD_PRELOAD` or `MALLOC_*` in the
  user's shell never reaches a measured process or the data it starts from.
- A wrapper that enters the studies' root (`unshare`, `chroot`) gets no `LD_*` variable at
  all (`wrapper`): the allocator is set inside the root, for the server alone.
"""

from __future__ import annotations

import os

from alloclab.catalog.allocators import TUNING_PREFIXES


def clean(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (the caller's environment by default) without a preload or allocator tuning."""
    env = os.environ if base is None else base
    return {k: v for k, v in env.items() if k != "LD_PRELOAD" and not k.startswith(TUNING_PREFIXES)}


def under_test(preload: str | None, tuning: dict[str, str], base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the process under test: `clean`, plus its preload and tuning."""
    env = clean(base)
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(tuning)
    return env


def wrapper(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a wrapper that enters the studies' root: `clean` and no `LD_*`."""
    return {k: v for k, v in clean(base).items() if not k.startswith("LD_")}
