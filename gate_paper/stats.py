r"""Statistics of the tables: means with t-distribution confidence
intervals."""

import math
from typing import Dict, Sequence, Tuple

import numpy as np


def mean_ci95(values: Sequence[float]) -> Tuple[float, float]:
    r"""Mean and half-width of the two-sided 95% confidence interval of the
    mean with the t-distribution (``n - 1`` degrees of freedom); the
    half-width is NaN for fewer than two values, both NaN if a value is
    NaN (a diverged run)."""
    from scipy.stats import t

    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return float(arr.mean()) if arr.size else math.nan, math.nan
    half = t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / math.sqrt(arr.size)
    return float(arr.mean()), float(half)


def paired_ci95(a: Dict, b: Dict) -> Tuple[float, float, int]:
    r"""Mean and 95% CI half-width of ``a[k] - b[k]`` over the keys both
    hold (the same split paired), and their number."""
    keys = sorted(set(a) & set(b))
    if not keys:
        return math.nan, math.nan, 0
    mean, half = mean_ci95([a[k] - b[k] for k in keys])
    return mean, half, len(keys)
