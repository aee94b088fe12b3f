"""IOVA allocators: one IOMMU domain's I/O virtual address space, managed by a chosen design.

>>> from dmalab.iova import IovaDomain
>>> dom = IovaDomain("segtree", address_bits=32)
>>> r = dom.allocate(16, align=16)
>>> r.pfn_lo % 16
0
>>> dom.free(r.pfn_lo, 16)

Designs: ``bitmap``, ``rbtree``, ``magazines+rbtree``, ``magazines+bitmap`` and ``segtree`` (the
default). Every refusal raises a subclass of :class:`dmalab.AllocationError` or
:class:`dmalab.ConfigError` naming the values involved.
"""

from dmalab._native import IovaDomain, IovaRange, allocator_names

ALLOCATORS: tuple[str, ...] = tuple(allocator_names())
"""Every design name :class:`IovaDomain` accepts."""

DEFAULT_ALLOCATOR = "segtree"

__all__ = ["ALLOCATORS", "DEFAULT_ALLOCATOR", "IovaDomain", "IovaRange"]
