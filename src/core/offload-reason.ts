/**
 * The offload layer's part of `x-kvroute-reason` and of `kvroute explain`'s line: why a prefill
 * was offloaded or kept, with both costs when the layer computed them. Empty for a policy
 * without the layer, so the header of every other policy is unchanged.
 *
 *   off                  ''
 *   not_decoding         '; colocated (target not decoding)'
 *   below_threshold      '; colocated (prefill below threshold)'
 *   no_prefill_instance  '; colocated (no decode-free instance) interference=589ms transfer=293ms'
 *   colocate             '; colocated interference=99ms <= transfer=239ms cold'
 *   offload              '; offload prefill=i2 interference=589ms > transfer=293ms'
 *
 * With the cost model's chargePrefill, a nonzero extraPrefillMs follows the transfer:
 * '; colocated interference=900ms <= transfer=239ms extra=1200ms'.
 */
import type { OffloadDecision } from './types.js';

const ms = (x: number): string => `${Math.round(x)}ms`;

export function offloadReason(o: OffloadDecision): string {
  const cold = (o.coldPair ? ' cold' : '') + (o.extraPrefillMs !== 0 ? ` extra=${ms(o.extraPrefillMs)}` : '');
  switch (o.outcome) {
    case 'off':
      return '';
    case 'not_decoding':
      return '; colocated (target not decoding)';
    case 'below_threshold':
      return '; colocated (prefill below threshold)';
    case 'no_prefill_instance':
      return `; colocated (no decode-free instance) interference=${ms(o.interferenceMs)} transfer=${ms(o.transferMs)}`;
    case 'colocate':
      return `; colocated interference=${ms(o.interferenceMs)} <= transfer=${ms(o.transferMs)}${cold}`;
    case 'offload':
      return `; offload prefill=${o.prefillInstance ?? o.prefillIndex} interference=${ms(o.interferenceMs)} > transfer=${ms(o.transferMs)}${cold}`;
  }
}
