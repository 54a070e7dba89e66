"""Knowledge answers from Gemini File Search stores (seed 000's RetrievalService), and store-name resolution.

Nothing here imports google-genai at import time: the client is built on the first Gemini call.
"""
