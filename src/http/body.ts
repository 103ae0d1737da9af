// Request bodies: read with a size limit and a time limit, and refused so that the client can read
// the refusal. Closing a connection while the client is still sending makes the kernel answer its
// data with a reset, which can destroy the error response before the client read it; so a body
// over the limit is answered at once and the rest of it is drained (uWS keeps parsing a body after
// its response ended and discards it), and the connection stays usable.
import { apiError, type ApiError } from '../errors.js';
import { closing, type ResponseSink } from './respond.js';

export interface BodyLimits {
  maxBytes: number;
  /** The whole body must have arrived this long after the request's headers (408 otherwise). */
  timeoutMs: number;
}

/**
 * Past this many bytes, draining a refused body is not worth it: the refusal closes the connection.
 * A client that declares (or sends) that much after being told 413 is not one to wait for.
 */
export const MAX_DRAIN_BYTES = 64 * 1024 * 1024;

function tooLarge(maxBytes: number): ApiError {
  return apiError('PAYLOAD_TOO_LARGE', `request body exceeds ${maxBytes} bytes`);
}

/**
 * Reads the request body. uWS hands chunks in an ArrayBuffer that is only valid during the
 * callback, so each chunk is copied. The size limit is enforced from the declared Content-Length
 * (an Expect: 100-continue client gets the 413 before it sends anything more) and while reading.
 * Must be called synchronously in the route handler: uWS wants onData registered before it returns.
 */
export function readBody(sink: ResponseSink, declaredLength: string | undefined, limits: BodyLimits): Promise<Buffer> {
  const { maxBytes, timeoutMs } = limits;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let over = false;
    const fail = (e: ApiError, close: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(close ? closing(e) : e);
    };
    // A trickling body would otherwise hold the request (counted in flight) until uWS closes the
    // connection, unanswered, about 10 s after the headers. Over the limit already: a drain that stalls.
    const timer = setTimeout(
      () => fail(over ? tooLarge(maxBytes) : apiError('REQUEST_TIMEOUT', `the request body did not arrive within ${timeoutMs} ms`), true),
      timeoutMs,
    );
    // A client that goes away mid-body never sends the last chunk: without this the request
    // would wait for it forever, counted in flight (the gauge, and every shutdown's drain).
    sink.onAbort(() => fail(apiError('BAD_REQUEST', 'the client closed the connection before the request body was complete'), false));
    const declared = declaredLength === undefined ? NaN : Number(declaredLength);
    if (declared > maxBytes) {
      // Answered now; uWS discards the declared rest as it arrives.
      fail(tooLarge(maxBytes), declared > MAX_DRAIN_BYTES);
      return;
    }
    sink.res.onData((chunk, isLast) => {
      if (settled) return;
      size += chunk.byteLength;
      if (size > maxBytes) {
        // Undeclared length (chunked): drained here until its end, then answered.
        over = true;
        chunks.length = 0;
        if (isLast) fail(tooLarge(maxBytes), false);
        else if (size > MAX_DRAIN_BYTES) fail(tooLarge(maxBytes), true);
        return;
      }
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) {
        settled = true;
        clearTimeout(timer);
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
      }
    });
  });
}
