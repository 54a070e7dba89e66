// What the live tests need from `python -m tests.client_server`: the server's address and keys.

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: run the tests through the test server, from the repository's root:\n` +
        `  PYTHONPATH=$PWD/layers/retrieval_core:$PWD .venv/bin/python -m tests.client_server ` +
        `npm --prefix clients/typescript test`,
    );
  }
  return value;
}

export const server = {
  url: required("RETRIEVAL_URL"),
  /** read, write and admin on every store */
  adminKey: required("RETRIEVAL_API_KEY"),
  /** read only */
  readKey: required("RETRIEVAL_READ_KEY"),
  /** read, at most `limitedRequests` requests per window of `limitedWindowS` seconds */
  limitedKey: required("RETRIEVAL_LIMITED_KEY"),
  limitedRequests: Number(required("LIMITED_REQUESTS")),
  limitedWindowS: Number(required("LIMITED_WINDOW_S")),
};

/** A fetch that remembers each answer's status and x-request-id. */
export function recordingFetch(): {
  fetch: (request: Request) => Promise<Response>;
  answers: { method: string; url: string; status: number; requestId: string | null }[];
} {
  const answers: { method: string; url: string; status: number; requestId: string | null }[] = [];
  return {
    answers,
    fetch: async (request: Request) => {
      const response = await fetch(request);
      answers.push({
        method: request.method,
        url: request.url,
        status: response.status,
        requestId: response.headers.get("x-request-id"),
      });
      return response;
    },
  };
}

/** Sleep until just after the next rate-limit window starts (windows are aligned on the epoch). */
export async function nextWindow(windowS: number): Promise<void> {
  const windowMs = windowS * 1000;
  const wait = windowMs - (Date.now() % windowMs) + 50;
  await new Promise((resolve) => setTimeout(resolve, wait));
}
