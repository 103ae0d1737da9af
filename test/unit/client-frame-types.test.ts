// The frame types a bot's listeners get. Bot walk: `stream.on('SUBSCRIBED', f => f.data.symbol)` did
// not compile (f was `never`: the SUBSCRIBED and UNSUBSCRIBED frames were one union member, which
// `Extract<..., { type: 'SUBSCRIBED' }>` does not match), and a gateway session's /ws, which pushes
// BOOK frames (docs/gateway.md), had no BOOK type: `socket.on('BOOK', ...)` did not compile either.
// Checked by the type checker (npm run typecheck); the runtime part only shows the checks ran.
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Book, FrameOf, GatewayFrame, GatewayFrameOf, GatewaySocketClient, StreamSubscription } from '../../src/client/index.js';

describe('frame types', () => {
  it('on(type) of /v1/stream gives each frame its own data, SUBSCRIBED and UNSUBSCRIBED included', () => {
    expectTypeOf<FrameOf<'SUBSCRIBED'>['data']['symbol']>().toEqualTypeOf<string>();
    expectTypeOf<FrameOf<'UNSUBSCRIBED'>['data']['timeframes']>().toEqualTypeOf<string[]>();
    expectTypeOf<FrameOf<'SUBSCRIBED'>>().not.toBeNever();
    const listen = (s: StreamSubscription) => s.on('SUBSCRIBED', (f) => f.data.symbol.length);
    expect(listen).toBeTypeOf('function');
  });

  it("a gateway session's /ws frames: QUOTE, CANDLE, BOOK, PONG, ERROR", () => {
    expectTypeOf<GatewayFrameOf<'BOOK'>['data']>().toEqualTypeOf<Book>();
    expectTypeOf<Book['bids'][number]>().toEqualTypeOf<{ price: number; volume: number }>();
    expectTypeOf<GatewayFrame['type']>().toEqualTypeOf<'QUOTE' | 'CANDLE' | 'BOOK' | 'PONG' | 'ERROR'>();
    const listen = (s: GatewaySocketClient) => s.on('BOOK', (f) => f.data.asks[0]?.price);
    const iterate = async (s: GatewaySocketClient) => {
      for await (const f of s) if (f.type === 'BOOK') return f.data.bids.length;
      return 0;
    };
    expect(listen).toBeTypeOf('function');
    expect(iterate).toBeTypeOf('function');
  });
});
