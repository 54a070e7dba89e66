"""Retrieval quality of a store on judged queries: `retrieval eval` and `make eval` share this package.

`metrics` is pure (nDCG, recall, the paired bootstrap); `beir` reads BEIR-format files; `runner` runs
retrieve requests through the service and tabulates them.
"""
