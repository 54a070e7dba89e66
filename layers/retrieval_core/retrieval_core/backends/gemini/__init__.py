"""Knowledge answers and retrieves from Gemini File Search stores, and store-name resolution.

Nothing here imports google-genai at import time: the client is built on the first Gemini call.
"""
