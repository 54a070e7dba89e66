"""What every outbound call shares: boto3 and google-genai clients, HTTP, retries, deadlines, keys."""
