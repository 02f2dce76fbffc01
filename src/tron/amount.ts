/**
 * Amount formatting. `amount_raw` is an integer string in the smallest unit (6 decimals for both
 * TRX and USDT); `amount` is its exact decimal in shortest form: "1.5", "1", "0.000001"
 * (DESIGN §Transfer extraction; SPEC §Event). Never through a JavaScript float.
 */

/** Decimals of TRX (sun) and of USDT on TRON. */
export const DECIMALS = 6;

/** Exact decimal string of `raw / 10^decimals`, without trailing zeros. `raw` must be ≥ 0. */
export function formatAmount(raw: bigint, decimals = DECIMALS): string {
  if (raw < 0n) throw new RangeError('amount must not be negative');
  const scale = 10n ** BigInt(decimals);
  const whole = raw / scale;
  const frac = (raw % scale).toString().padStart(decimals, '0').replace(/0+$/, '');
  return frac === '' ? whole.toString() : `${whole}.${frac}`;
}
