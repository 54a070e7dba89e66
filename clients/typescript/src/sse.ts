/** One server-sent event: its `event` field (default "message") and its data lines joined by "\n". */
export interface ServerSentEvent {
  event: string;
  data: string;
}

/**
 * The events of a `text/event-stream` body, as the HTML standard reads them: lines end with CRLF,
 * LF or CR; `event:` and `data:` fields (one leading space dropped); a blank line dispatches;
 * comments (`:`) and `id:` / `retry:` are ignored; an event without data is not dispatched.
 */
export async function* readServerSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let pendingCarriageReturn = false;

  function* lines(text: string, final: boolean): Generator<string> {
    buffer += text;
    let start = 0;
    for (let index = 0; index < buffer.length; index += 1) {
      const character = buffer[index];
      if (pendingCarriageReturn) {
        pendingCarriageReturn = false;
        if (character === "\n" && index === start) {
          start = index + 1;
          continue;
        }
      }
      if (character === "\n" || character === "\r") {
        yield buffer.slice(start, index);
        if (character === "\r") pendingCarriageReturn = true;
        start = index + 1;
      }
    }
    buffer = buffer.slice(start);
    if (final && buffer.length > 0) {
      yield buffer;
      buffer = "";
    }
  }

  function* dispatch(line: string): Generator<ServerSentEvent> {
    if (line === "") {
      if (data.length > 0) yield { event: event || "message", data: data.join("\n") };
      event = "";
      data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }

  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        break;
      }
      for (const line of lines(decoder.decode(value, { stream: true }), false)) yield* dispatch(line);
    }
    for (const line of lines(decoder.decode(), true)) yield* dispatch(line);
    // A stream cut before its final blank line loses the unfinished event, as in a browser.
  } finally {
    // A consumer that stops early closes the connection rather than leaving it open.
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
