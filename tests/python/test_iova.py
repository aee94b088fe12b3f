"""dmalab.iova: every design behaves the same through Python, and every error has its class."""

from __future__ import annotations

import random

import pytest

import dmalab
from dmalab.iova import ALLOCATORS, DEFAULT_ALLOCATOR, IovaDomain


@pytest.fixture(params=ALLOCATORS)
def dom(request: pytest.FixtureRequest) -> IovaDomain:
    return IovaDomain(request.param, pfn_lo=1, pfn_hi=4095)


def test_names_and_default() -> None:
    assert set(ALLOCATORS) == {
        "bitmap",
        "rbtree",
        "magazines+rbtree",
        "magazines+bitmap",
        "segtree",
    }
    assert DEFAULT_ALLOCATOR == "segtree"
    assert IovaDomain().allocator == "segtree"


def test_allocate_respects_alignment_limit_and_boundary(dom: IovaDomain) -> None:
    r = dom.allocate(5, align=8, limit=1000, boundary=16)
    assert r.pages == 5
    assert r.pfn_lo % 8 == 0
    assert r.pfn_hi <= 1000
    assert r.pfn_lo // 16 == r.pfn_hi // 16
    assert r.pfn_hi == r.pfn_lo + 4


def test_random_allocations_never_overlap(dom: IovaDomain) -> None:
    rng = random.Random(7)
    live: list[tuple[int, int]] = []
    taken: set[int] = set()
    for _ in range(600):
        if live and rng.random() < 0.45:
            lo, n = live.pop(rng.randrange(len(live)))
            dom.free(lo, n)
            taken.difference_update(range(lo, lo + n))
            continue
        n = rng.choice([1, 1, 2, 3, 8, 17])
        try:
            r = dom.allocate(n, align=rng.choice([1, 2, 4]))
        except dmalab.NoSpaceError:
            continue
        pages = set(range(r.pfn_lo, r.pfn_hi + 1))
        assert not pages & taken, f"{r} overlaps a live range"
        taken |= pages
        live.append((r.pfn_lo, r.pages))
    s = dom.stats()
    assert s["live_allocations"] == len(live)
    if not dom.allocator.startswith("magazines"):  # magazines count their rounding padding
        assert s["allocated_pages"] == len(taken)
    total = dom.pfn_hi - dom.pfn_lo + 1
    assert s["free_pages"] + s["allocated_pages"] + s["reserved_pages"] + s["cached_pages"] == total


def test_free_errors_lose_nothing(dom: IovaDomain) -> None:
    r = dom.allocate(4)
    with pytest.raises(dmalab.SizeMismatchError, match="allocation there is 4 pages"):
        dom.free(r.pfn_lo, 3)
    with pytest.raises(dmalab.NotAllocatedError, match="double free or never allocated"):
        dom.free(r.pfn_lo + 1, 3)
    with pytest.raises(dmalab.InvalidRequestError, match="zero"):
        dom.free(r.pfn_lo, 0)
    with pytest.raises(dmalab.OutOfDomainError):
        dom.free(5000, 1)
    dom.free(r.pfn_lo, 4)
    with pytest.raises(dmalab.NotAllocatedError):
        dom.free(r.pfn_lo, 4)


def test_reserve(dom: IovaDomain) -> None:
    a = dom.allocate(1, limit=50)
    dom.reserve(100, 199)
    with pytest.raises(dmalab.FreeOfReservedError):
        dom.free(150, 1)
    for _ in range(200):
        r = dom.allocate(3)
        assert r.pfn_hi < 100 or r.pfn_lo > 199
    with pytest.raises(dmalab.ReserveConflictError, match="overlaps the allocation"):
        dom.reserve(a.pfn_lo, a.pfn_lo + 2)
    with pytest.raises(dmalab.OutOfDomainError, match="outside the domain"):
        dom.reserve(4000, 5000)
    assert dom.stats()["reserved_pages"] == 100


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"pages": 0}, dmalab.InvalidRequestError, "zero"),
        ({"pages": 2, "align": 3}, dmalab.InvalidRequestError, "alignment 3 pages is not a power"),
        ({"pages": 2, "boundary": 6}, dmalab.InvalidRequestError, "boundary 6 pages"),
        ({"pages": 9, "boundary": 8}, dmalab.InvalidRequestError, "larger than the segment"),
        ({"pages": 1, "limit": 10_000}, dmalab.InvalidRequestError, "limit 0x2710 is outside"),
        ({"pages": 5000}, dmalab.NoSpaceError, "no free space for 5000 pages"),
    ],
)
def test_request_errors(dom: IovaDomain, kwargs: dict[str, int], exc: type, match: str) -> None:
    rest = {k: v for k, v in kwargs.items() if k != "pages"}
    with pytest.raises(exc, match=match):
        dom.allocate(kwargs["pages"], **rest)


def test_config_errors() -> None:
    with pytest.raises(dmalab.ConfigError, match='unknown allocator "splay"'):
        IovaDomain("splay")
    with pytest.raises(dmalab.ConfigError, match="page size 1000"):
        IovaDomain(page_size=1000)
    with pytest.raises(dmalab.ConfigError, match="too large for the bitmap"):
        IovaDomain("bitmap", address_bits=64)
    with pytest.raises(dmalab.ConfigError, match="not both"):
        IovaDomain(pfn_hi=10, address_bits=32)
    with pytest.raises(dmalab.ConfigError, match="address width 8 bits"):
        IovaDomain(address_bits=8)
    assert issubclass(dmalab.NoSpaceError, dmalab.AllocationError)
    assert issubclass(dmalab.AllocationError, dmalab.DmalabError)


def test_big_sparse_domain_grows_with_use_only() -> None:
    # The directories' top level is a fixed cost (about 4.7 MB at 48 bits, a known limit);
    # what use adds must stay small.
    dom = IovaDomain("segtree", address_bits=48)
    empty = dom.memory_bytes()
    ranges = [dom.allocate(1) for _ in range(4096)]
    assert (dom.memory_bytes() - empty) / len(ranges) < 64
    for r in ranges:
        dom.free(r.pfn_lo, r.pages)
    dom.flush_caches()
    assert dom.stats()["allocated_pages"] == 0


def test_work_counters_are_deterministic() -> None:
    def run() -> dict[str, int]:
        d = IovaDomain("rbtree", pfn_hi=1 << 16)
        rng = random.Random(3)
        live = [d.allocate(rng.randint(1, 9)) for _ in range(300)]
        for r in live[::2]:
            d.free(r.pfn_lo, r.pages)
        return d.work()

    first = run()
    assert first == run()
    assert first["allocs"] == 300
    assert first["frees"] == 150
    assert first["nodes_visited"] > 300


def test_negative_and_huge_integers_are_typed_errors() -> None:
    dom = IovaDomain("segtree", address_bits=32)
    with pytest.raises(dmalab.InvalidRequestError, match=r"pages is -1; valid: 0\.\.=2\^64-1"):
        dom.allocate(-1)
    with pytest.raises(dmalab.InvalidRequestError, match="pfn is -3"):
        dom.free(-3, 1)
    with pytest.raises(dmalab.InvalidRequestError, match="pages is 1180591620717411303424"):
        dom.allocate(2**70)
    with pytest.raises(dmalab.ConfigError, match="address_bits is -1"):
        IovaDomain("segtree", address_bits=-1)
