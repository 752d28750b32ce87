"""The plan parser is fuzzed: whatever a plan file or flags hold, the answer is a Plan or an
AlloclabError naming the problem, never a traceback. Bounded for CI."""

import string

from helpers import expand
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_plan import FOUND

from alloclab import plan
from alloclab.core.errors import AlloclabError

KEYS = sorted(plan.TOP_SCHEMA) + sorted(plan.schema.workload_schema()) + sorted(plan.ENGINE_OPTIONS) + ["bogus", ""]
WORDS = list(plan.ENGINES + plan.WORKLOADS + plan.PATTERNS + plan.SYNC + plan.COMPRESSION + plan.TPCC_MIXES) + [
    "glibc", "jemalloc", "mimalloc", "jemalloc+MALLOC_CONF=narenas:2", "x=/nonexistent.so", "64MiB", "10s", "-1",
    "1e999", "nan", "", " ", "small"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(WORDS), st.text(string.printable, max_size=12))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=12)
workload = st.dictionaries(st.sampled_from(sorted(plan.schema.workload_schema()) + ["bogus"]), values, max_size=6)
plans = st.fixed_dictionaries(
    {},
    optional={
        "engines": st.one_of(values, st.lists(st.sampled_from(plan.ENGINES), max_size=3)),
        "allocators": st.one_of(values, st.lists(st.sampled_from(["glibc", "jemalloc", "mimalloc"]), max_size=3)),
        "runs": values, "seed": values, "warmup_s": values, "baseline": values, "interval_ms": values,
        "target_ci_pct": values, "margin_pct": values, "budget": values, "min_runs": values, "max_rounds": values,
        "min_window_s": values, "baseline_engine": values,
        "scale": st.one_of(values, st.sampled_from(["smoke", "quick"])),
        "questions": st.one_of(values, st.lists(st.sampled_from(["allocators", "engines", "profiles", "x"]),
                                                max_size=3)),
        "engine_options": st.one_of(values, st.dictionaries(st.sampled_from(sorted(plan.ENGINE_OPTIONS)), values)),
        "profiles": st.one_of(values, st.dictionaries(st.text(max_size=6), st.dictionaries(
            st.sampled_from(sorted(plan.ENGINE_OPTIONS)), values, max_size=3), max_size=2)),
        "workloads": st.one_of(values, st.lists(workload, max_size=3)),
        "bogus": values,
    })


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans)
def test_any_plan_dict_is_a_plan_or_a_clear_error(raw):
    try:
        p = plan.load(raw, found_allocators=FOUND, default_seed=1)
    except AlloclabError as e:
        assert str(e).strip()
        return
    specs = expand(p)
    assert specs and len(specs) <= plan.MAX_RUNS


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_plan_file_is_a_plan_or_a_clear_error(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("fuzz") / "plan.toml"
    f.write_bytes(data)
    try:
        plan.load(plan.read_toml(f), found_allocators=FOUND, default_seed=1)
    except AlloclabError:
        pass
