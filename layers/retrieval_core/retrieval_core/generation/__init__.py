"""Answer generators behind one interface (base.py): the grounding prompt, citations, and the providers."""
