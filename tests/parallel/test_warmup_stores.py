"""warmup() fills the store the program uses (set_store), and writes nowhere it did not point
(review H, finding 3). Before the fix, workers given no plain "disk" level fell back to
CUPY_RAWCODE_CACHE_DIR: they wrote there (into a directory the program had made read-only, too),
the program's own store never saw what they compiled, and warmup still said "compiled"."""

import pytest
from conftest import dict_store, recounts_done

import cupy_rawcode
from cupy_rawcode.store import Levels, MemoryStore, ReadOnly, layout, set_store
from cupy_rawcode.store.directory import DirectoryStore

ARCH = "sm_80"


def tiny(i: int) -> str:
    return f'extern "C" __global__ void w{i}(float* x) {{ x[threadIdx.x] += {i + 7}.0f; }}\n'


def files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _env_dir_claimed():
    """The environment's cache directory, made a cache (as a program that used it would)."""
    env = layout.cache_dir()
    DirectoryStore(env).put("00" * 32, b"not read")  # claims it (CACHEDIR.TAG)
    recounts_done()
    return env


# the program's store -> (its levels, the level a first compile must hit, whether warmup can keep
# what it compiles there)
def memory_only(tmp_path, team):
    return [MemoryStore()], "memory", True


def directory_made_read_only(tmp_path, team):
    return [MemoryStore(), ReadOnly(DirectoryStore(_env_dir_claimed()))], "memory", True


def remote_only(tmp_path, team):
    return [team], "team", True


def own_directory_and_remote(tmp_path, team):
    return [MemoryStore(), DirectoryStore(tmp_path / "own"), team], "memory", True


def everything_read_only(tmp_path, team):
    return [ReadOnly(DirectoryStore(_env_dir_claimed()))], None, False


STACKS = {
    "memory only": memory_only,
    "a directory made read-only": directory_made_read_only,
    "a remote level only": remote_only,
    "a directory and a remote level of its own": own_directory_and_remote,
    "every level read-only": everything_read_only,
}


@pytest.fixture
def program_store():
    yield
    set_store(None)


@pytest.mark.parametrize("stack", STACKS.values(), ids=STACKS.keys())
def test_warmup_fills_the_programs_store_and_nothing_else(
    monkeypatch, tmp_path, compiles, program_store, stack
):
    monkeypatch.setenv("CUPY_RAWCODE_OVERLAP", "0")
    team = dict_store()
    levels, hit_level, kept = stack(tmp_path, team)
    env = layout.cache_dir()
    before = files(env) if env.is_dir() else []
    store = Levels(levels)
    set_store(store)
    kernels = [cupy_rawcode.RawKernel(tiny(i), f"w{i}") for i in range(2)]
    summary = cupy_rawcode.warmup(*kernels, arch=ARCH, workers=2)
    recounts_done()
    assert (files(env) if env.is_dir() else []) == before  # nothing where it did not point
    assert compiles == []  # the workers compiled
    if not kept:  # compiled, but nowhere to keep it: said so, not "compiled"
        assert summary.compiled == [] and len(summary.lost) == 2 and not summary.ok
        assert "2 compiled, but not stored" in str(summary)
        return
    assert len(summary.compiled) == 2 and summary.lost == [] and summary.ok, str(summary)
    stats = {row["level"]: row for row in store.stats()["levels"]}
    hits = stats[hit_level]["hits"]
    for k in kernels:
        k.compile(arch=ARCH)
    assert compiles == []  # every first compile was a hit in the program's store
    assert store.stats()["levels"][[lv.name for lv in levels].index(hit_level)]["hits"] > hits
    if team in levels:
        assert len(team.writes) >= 2  # the entries (and their closure records)
    own = tmp_path / "own"
    if any(getattr(lv, "root", None) == own for lv in levels):
        assert len([f for f in files(own) if f.startswith("entries/")]) >= 2


def test_the_environments_store_is_written_by_the_workers_themselves(compiles, monkeypatch):
    from cupy_rawcode.parallel import stores

    landed = []
    monkeypatch.setattr(stores, "land", lambda *a: landed.append(a) or True)
    kernels = [cupy_rawcode.RawKernel(tiny(i), f"w{i}") for i in range(2)]
    summary = cupy_rawcode.warmup(*kernels, arch=ARCH, workers=2)
    assert len(summary.compiled) == 2 and landed == []  # no bytes sent: the workers wrote them
    for k in kernels:
        k.compile(arch=ARCH)
    assert compiles == []


WORKER_STORES = {
    "the environment's stack": (True, None),
    "memory only": (False, []),
    "a directory made read-only": (False, ["Collecting"]),
}


@pytest.mark.parametrize("same, extra", WORKER_STORES.values(), ids=WORKER_STORES.keys())
def test_a_worker_never_writes_a_level_the_parent_cannot_write(same, extra):
    from cupy_rawcode.parallel import stores
    from cupy_rawcode.store import default_store

    env = layout.cache_dir()
    if same:
        parent = default_store()
    elif extra == []:
        parent = Levels([MemoryStore()])
    else:
        parent = Levels([MemoryStore(), ReadOnly(DirectoryStore(env))])
    hello = stores.hello_fields(parent)
    store, collecting = stores.worker_store(hello)
    if same:
        assert collecting is None and stores.describe(store) == stores.describe(parent)
        return
    assert collecting is not None and hello["cache_dir"] is None
    writable = [lv for lv in store.levels if not lv.read_only]
    assert writable == [collecting]
