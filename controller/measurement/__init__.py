"""Measuring what jobs really send: sFlow packet samples (``sflow``) turned into per-pair byte
estimates and traffic patterns (``learner``). Standard library only; no flow entries needed."""
