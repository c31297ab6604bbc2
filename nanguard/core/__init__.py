"""The framework-free core: what every backend shares, importing no framework at all.

- ``vectors``  the op contract as data: each safe op's singular points, expected values and
  gradients, tolerances by dtype name;
- ``hazards``  the catalogue of NaN/Inf hazards: when an op is non-finite, why, and the fix
  (``hazard`` defines an entry and its wording; ``catalogue_*`` hold the entries);
- ``summary``, ``location``, ``report``  what a finding says, built from summaries, never tensors.
"""
