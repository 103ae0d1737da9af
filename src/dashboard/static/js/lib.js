// Preact + htm, served by the gateway from node_modules (no build step). htm templates render every
// interpolated value as text; nothing in the console uses dangerouslySetInnerHTML.
import { Fragment, h, render } from '/dashboard/vendor/preact.js';
import { useCallback, useEffect, useMemo, useRef, useState } from '/dashboard/vendor/hooks.js';
import htm from '/dashboard/vendor/htm.js';

export const html = htm.bind(h);
export { Fragment, h, render, useCallback, useEffect, useMemo, useRef, useState };
