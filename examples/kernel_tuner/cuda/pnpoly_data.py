#!/usr/bin/env python3
"""pnpoly_data.py - writes the constant-memory inputs of the pnpoly conformance problem.

Kernel Tuner's pnpoly example (../shared/kernel_tuner_examples/cuda/pnpoly.py) tests points
against a circle of 600 vertices at sorted random angles, and its host code (pnpoly_host.cu)
computes each edge's slope on the CPU for use_precomputed_slopes = 1. pnpoly.json tunes the
kernel cn_pnpoly itself (as benchmark_hub's own T1 problem for it does), so both inputs are
files here, read as FillType BinaryRaw into the kernel's __constant__ d_vertices and d_slopes:

  pnpoly_vertices.f32   600 float2: a circle of radius 1 around (1, 1), clockwise
  pnpoly_slopes.f32     600 float:  slope[j] = (v[j-1].x - v[j].x) / (v[j-1].y - v[j].y), in
                        float arithmetic, with v[-1] the last vertex (as the host code does)

The points are kerntune's Random fill of the problem's argument 1 (uniform in [0, 2), RandomSeed
7), so every point lies near the circle. The kernel's four between_method values treat a point
whose y equals a vertex's y differently (its author says so): for the outputs of all
configurations to agree, no vertex may share its y with a point. This script draws the same
points kerntune draws (its splitmix64 stream for that argument and seed) up to MAX_POINTS and
moves any vertex that would, by one float step, until none does. So the problem's outputs are
the same for every configuration at any ProblemSize up to MAX_POINTS.

Needs numpy. Run from anywhere; writes beside itself.
"""
import math
from pathlib import Path

import numpy

VERTICES = 600
MAX_POINTS = 20_000_000
SEED = 7       # the points' RandomSeed in pnpoly.json
ARG_INDEX = 1  # the points' place among the problem's Arguments
SCALE = 2.0    # the points' FillValue: uniform in [0, SCALE)
M64 = (1 << 64) - 1


def points_y(n):
    """The y of the first n points as kerntune fills them: element 2i+1 of the argument's stream
    (state = seed ^ golden * (index + 1); each element u = (splitmix64() >> 11) * 2^-53, times the
    FillValue, rounded to float)."""
    golden = 0x9E3779B97F4A7C15
    state = (SEED ^ (golden * (ARG_INDEX + 1))) & M64
    k = numpy.arange(1, 2 * n + 1, dtype=numpy.uint64)
    with numpy.errstate(over="ignore"):
        z = numpy.uint64(state) + k * numpy.uint64(golden)
        z = (z ^ (z >> numpy.uint64(30))) * numpy.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> numpy.uint64(27))) * numpy.uint64(0x94D049BB133111EB)
        z = z ^ (z >> numpy.uint64(31))
    u = (z >> numpy.uint64(11)).astype(numpy.float64) * 2.0**-53
    return (u * SCALE).astype(numpy.float32)[1::2]


def main():
    rng = numpy.random.default_rng(SEED)
    angles = numpy.sort(rng.random(VERTICES) * 2.0 * math.pi)[::-1]
    v = numpy.empty((VERTICES, 2), dtype=numpy.float32)
    v[:, 0] = (1.0 + numpy.cos(angles)).astype(numpy.float32)
    v[:, 1] = (1.0 + numpy.sin(angles)).astype(numpy.float32)
    taken = numpy.unique(points_y(MAX_POINTS))
    moved = 0
    for j in range(VERTICES):
        while True:
            i = numpy.searchsorted(taken, v[j, 1])
            if i >= len(taken) or taken[i] != v[j, 1]:
                break
            v[j, 1] = numpy.nextafter(v[j, 1], numpy.float32(numpy.inf))
            moved += 1
    prev = numpy.roll(v, 1, axis=0)  # prev[j] = v[j - 1], prev[0] = v[-1]
    with numpy.errstate(divide="ignore", invalid="ignore"):
        slopes = (prev[:, 0] - v[:, 0]) / (prev[:, 1] - v[:, 1])  # float32 arithmetic throughout
    here = Path(__file__).resolve().parent
    v.astype("<f4").tofile(here / "pnpoly_vertices.f32")
    slopes.astype("<f4").tofile(here / "pnpoly_slopes.f32")
    print("pnpoly_data: %d vertices (%d float steps to avoid ties with %d points), %d slopes" % (VERTICES, moved, MAX_POINTS, VERTICES))


if __name__ == "__main__":
    main()
