"""Fixtures shared by all tests: array backends, users and teams."""

from __future__ import annotations

import importlib

import pytest


def _xp_params() -> list:
    params = [pytest.param("numpy", id="numpy"), pytest.param("array_api_strict", id="strict")]
    params.append(pytest.param("cupy", id="cupy", marks=pytest.mark.gpu))
    return params


@pytest.fixture(params=_xp_params())
def xp(request):
    """The array namespace under test: numpy (array-api-compat), array_api_strict, cupy."""
    name = request.param
    if name == "numpy":
        from array_api_compat import numpy as compat_numpy

        return compat_numpy
    if name == "cupy":
        cupy = pytest.importorskip("cupy")
        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                pytest.skip("no GPU")
        except Exception as exc:  # no driver
            pytest.skip(f"no GPU: {exc}")
        from array_api_compat import cupy as compat_cupy

        return compat_cupy
    return importlib.import_module(name)
