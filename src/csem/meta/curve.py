"""Learning curves: agreement against the number of training labels, and what more labels would buy.

One fit for every learning curve in csem (the pipeline's curve stage, the benchmarks' label-scaling
studies): least squares of ``value = a + b ln(labels)`` (a straight line on a log axis, the shape
agreement curves of distilled metrics take over the measured range; CSEM paper Fig. 3), with the
slope's 95% interval from the t distribution on ``n - 2`` degrees of freedom (``scipy.stats.linregress``
standard error; every point, seeds included, is one observation). From the fit:

* ``gain_per_doubling`` = ``b ln 2``: the expected change of the agreement when the labels double,
  with its interval;
* ``labels_to(target)``: ``exp((target - a) / b)``, the labels at which the line reaches ``target``
  (None for a slope that is not positive, or an answer beyond `MAX_EXTRAPOLATION` times the
  largest measured point: no line fitted to a few points says anything that far out);
* ``trend``: ``rising`` (the slope's interval above 0), ``falling`` (below 0), ``flat`` (the gain per
  doubling within +-`FLAT` and its interval containing 0) or ``unclear`` (an interval containing 0
  and a point estimate outside +-FLAT: too few or too noisy points to tell).
"""

from __future__ import annotations

import math
from typing import Sequence

from csem.errors import InputError

#: a gain per doubling within +-FLAT (Spearman) counts as flat
FLAT = 0.01
#: the labels a fit may be asked about, at most this multiple of the largest measured point
MAX_EXTRAPOLATION = 100.0


def log_fit(points: Sequence[tuple[float, float]], *, confidence: float = 0.95) -> dict:
    """Fit ``value = intercept + slope * ln(labels)`` to ``(labels, value)`` points.

    Args:
        points: at least 2 points with at least 2 distinct label counts (> 0); values (e.g. Spearman)
            None or NaN are left out.
        confidence: of the slope's interval.

    Returns:
        ``{"intercept", "slope", "slope_ci", "gain_per_doubling", "r2", "gain_ci", "n_points", "labels_max",
        "trend"}`` (``r2``: the fit's R^2); ``slope_ci``/``gain_ci`` are None with fewer than 3 points (no residual to estimate
        the error from). ``trend``: see the module docstring.

    Raises:
        ValueError: fewer than 2 usable points or a single label count.
    """
    from scipy import stats

    pts = [(float(x), float(v)) for x, v in points if v is not None and not math.isnan(float(v)) and x > 0]
    if len(pts) < 2 or len({x for x, _ in pts}) < 2:
        raise InputError(f"a learning curve needs points at 2 or more label counts, got {pts}")
    xs, ys = [math.log(x) for x, _ in pts], [v for _, v in pts]
    res = stats.linregress(xs, ys)
    slope, icpt = float(res.slope), float(res.intercept)
    ci = None
    if len(pts) > 2 and not math.isnan(res.stderr):
        t = float(stats.t.ppf(0.5 + confidence / 2, len(pts) - 2))
        ci = [slope - t * float(res.stderr), slope + t * float(res.stderr)]
    ln2 = math.log(2)
    gain = slope * ln2
    return {"intercept": icpt, "slope": slope, "slope_ci": ci, "gain_per_doubling": gain, "r2": float(res.rvalue) ** 2,
            "gain_ci": None if ci is None else [ci[0] * ln2, ci[1] * ln2], "n_points": len(pts),
            "labels_max": max(x for x, _ in pts), "trend": trend(gain, None if ci is None else [c * ln2 for c in ci])}


def trend(gain: float, gain_ci: Sequence[float] | None) -> str:
    """``rising`` | ``falling`` | ``flat`` | ``unclear`` from the gain per doubling and its interval."""
    if gain_ci is not None and gain_ci[0] > 0:
        return "rising"
    if gain_ci is not None and gain_ci[1] < 0:
        return "falling"
    if abs(gain) <= FLAT:
        return "flat"
    return "unclear"


def labels_to(fit: dict, target: float) -> float | None:
    """The labels at which the fitted line reaches ``target``; None for a slope that is not positive or an
    answer beyond `MAX_EXTRAPOLATION` times the largest measured
    point. A target the line already passes at the largest point gives that point's label count or fewer."""
    slope = fit["slope"]
    if slope <= 1e-9:
        return None
    try:
        need = math.exp((target - fit["intercept"]) / slope)
    except OverflowError:
        return None
    return need if need <= MAX_EXTRAPOLATION * fit["labels_max"] else None
