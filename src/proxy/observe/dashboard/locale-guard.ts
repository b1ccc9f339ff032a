/**
 * The dashboard's locale guard, served as /dashboard/locale.js and loaded before uPlot: plain
 * browser JavaScript kept as a string module (see page-script.ts for why).
 *
 * Why: uPlot builds `new Intl.NumberFormat(navigator.language)` when its script loads. Some
 * browsers report a tag Intl rejects (headless Chromium without a locale says `en-US@posix`);
 * the constructor throws a RangeError, uPlot never defines itself and the page stays at
 * "connecting…". When, and only when, the browser's own tag is rejected, this replaces
 * Intl.NumberFormat with a wrapper that retries a rejected locale as 'en-US' (errors from the
 * options still throw) and marks the page with `data-locale-fallback` on <html>.
 */
export const LOCALE_GUARD_SCRIPT = String.raw`'use strict';
(function () {
  var Native = Intl.NumberFormat;
  try {
    new Native(navigator.language);
    return; // the browser's locale works: change nothing
  } catch (e) {
    // fall through: install the fallback
  }
  function usable(locales) {
    try {
      new Native(locales);
      return locales;
    } catch (e) {
      return 'en-US';
    }
  }
  function NumberFormat(locales, options) {
    return new Native(usable(locales), options);
  }
  NumberFormat.prototype = Native.prototype;
  NumberFormat.supportedLocalesOf = Native.supportedLocalesOf;
  Intl.NumberFormat = NumberFormat;
  document.documentElement.setAttribute('data-locale-fallback', String(navigator.language));
})();
`;
