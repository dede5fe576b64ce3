"""Statistics of eval outcomes: pure functions from numbers to numbers.

What lives here: effective sample sizes of autocorrelated outcome series, Wilson intervals of
pass rates, the paired regression test with its Holm family adjustment and difference interval,
the block bootstrap of median latency changes, the minimum detectable drop and agreement between two
labellers (Cohen's kappa: ``agreement``); the arms' two-sided paired test and Pareto sets
(``sidebyside``), binomial tails (``binomial``), and the one percentile, quantile and mean every
report uses (``descriptive``). Every function
takes plain sequences of floats, returns a small frozen dataclass (with ``to_json()`` where it
becomes report JSON) or a float, and has no I/O, no state and no randomness except a seeded
``random.Random`` it makes itself. The modules use only the standard library and import
nothing from the rest of glasskit_eval.

What it may not know: results, statuses, reports, files, the CLI. The caller turns sample
results into numbers (1 passed, 0 failed or error; with ``--repeat`` a sample's pass fraction),
one series per (case, target) in time order, matches baseline and candidate samples into pairs,
and leaves out what is not a model change (a relabelled expectation, a sample only one run has).

How to use (import from the modules; this ``__init__`` imports nothing):

- ``effective.effective_sample(series) -> EffectiveSample``: n, pooled lag-1 autocorrelation r (corrected
  for its small-series bias, clamped to [0, 0.99]) and ``n_eff = n (1 - r) / (1 + r)``.
- ``intervals.pass_rate_interval(series, confidence=0.95) -> PassRateInterval | None``: pass rate and
  Wilson interval at n_eff; ``.to_json()`` is the report's ``pass_rate_ci``.
- ``paired.regression_family(by_target, alpha=0.05, confidence=0.95, noise=None) -> RegressionFamily``:
  paired series of ``(baseline, candidate)`` per target; a one-sided test of a pass-rate drop per
  target and overall, Holm-adjusted together (one target: tested once). ``.overall`` /
  ``.per_target[t]`` are ``PairedTest``; ``.to_json()`` is the report's ``significance``.
  ``noise`` (with repeats): per target ``trial_noise(series of (baseline trials, candidate trials))``,
  the within-version noise the test then learns r and its null variance from.
  ``paired_regression_test(series, alpha, confidence, noise)`` tests one set alone; ``holm(p_values)``;
  ``p_text(p)`` how reports print a p-value.
- ``sidebyside.paired_difference_test(series, alpha, confidence, noise=None) -> PairedTest | None``:
  the arms' two-sided test of ``(control, arm)`` pairs, the counts scaled as the one-sided test's
  (``noise``: the same ``trial_noise`` of both arms' trials); ``holm_across(tests)``, ``pareto_front``.
- ``bootstrap.median_latency_change(series, confidence=0.95, resamples=2000, seed=0) -> LatencyChange |
  None``: paired ``(baseline, candidate)`` latencies; ``.exceeds(S)`` is
  ``--fail-on-latency-regression S``.
- ``power.minimum_detectable_drop(effective_pairs, pass_rate, flip_rate=None, alpha=0.05, power=0.8)
  -> float | None``: the smallest drop seen with 80% power; a non-significant comparison with
  ``-delta`` below it is inconclusive. ``power.repeats_to_detect(drop, pairs, noise_flip_rate, r)``:
  the ``--repeat`` that would let the test see a consistent drop of that size.
- ``anytime.start(planned, units, scale, alpha)`` / ``anytime.observe(state, passes, size) -> RateSequence``:
  the anytime-valid bound (betting confidence sequence, sampling without replacement) on the pass
  rate of a whole finite population evaluated in a random order of blocks; ``.low``, ``.high``,
  ``.verdict(minimum)``; ``gate_alpha(alpha, gates)`` splits one alpha across gates.
- ``agreement.cohen_kappa(pairs, confidence=0.95) -> Kappa | None``: two labellers' labels of the same
  items (any hashables); percent agreement, kappa and its Fleiss-Cohen-Everitt interval.
  ``within_tolerance(pairs, tolerance)``: the share of numeric pairs within a tolerance.
- ``descriptive.percentile(ordered, p)`` (nearest rank: latency p50/p95 everywhere),
  ``descriptive.interpolated_quantile(sorted_values, fraction)`` (type 7: the bootstrap's) and
  ``descriptive.mean(values)``.
- Lower level: ``lag1_autocorrelation`` (as measured), ``corrected_autocorrelation`` (the r
  used everywhere), ``effective_factor``, ``wilson_bounds``,
  ``mcnemar_drop_p_value``, ``count_scale`` (the one scaling of every paired test's counts), ``paired_difference_interval``, ``regularized_beta``,
  ``binomial_upper_tail``, ``upper_mid_p``.
"""
