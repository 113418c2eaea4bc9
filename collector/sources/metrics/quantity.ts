// Kubernetes resource quantities ("250m", "1500500n", "64Mi", "1.5e3") turned into exact integer
// counts with BigInt: a PodMetrics usage summed over containers must give the nanocores the
// kubelet reported, with no float drift (0.1 + 0.2 style) on the way.

const BINARY_SUFFIXES: Readonly<Record<string, bigint>> = {
  Ki: 1n << 10n,
  Mi: 1n << 20n,
  Gi: 1n << 30n,
  Ti: 1n << 40n,
  Pi: 1n << 50n,
  Ei: 1n << 60n,
};

/** Decimal SI suffixes as powers of ten. */
const DECIMAL_SUFFIXES: Readonly<Record<string, number>> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};

const QUANTITY = /^([+-]?)(\d+)?(?:\.(\d*))?(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$/;

/**
 * The quantity times `unit` (1e9 for nanocores, 1 for bytes), rounded up to a whole number as
 * Kubernetes' ScaledValue does. Throws on text that is not a quantity.
 */
export function quantityTimes(text: string, unit: bigint): bigint {
  const match = QUANTITY.exec(text.trim());
  if (match === null) throw new Error(`"${text}" is not a Kubernetes quantity`);
  const [, sign, whole = '', fraction = '', exponent, suffix = ''] = match;
  if (whole === '' && fraction === '') throw new Error(`"${text}" is not a Kubernetes quantity`);
  // value = digits / 10^fraction.length, scaled by the suffix.
  let numerator = BigInt(`${whole}${fraction}` || '0') * unit;
  let denominator = 10n ** BigInt(fraction.length);
  const binary = BINARY_SUFFIXES[suffix];
  if (binary !== undefined) {
    numerator *= binary;
  } else {
    const power = decimalPower(text, exponent, suffix);
    if (power >= 0) numerator *= 10n ** BigInt(power);
    else denominator *= 10n ** BigInt(-power);
  }
  const rounded = (numerator + denominator - 1n) / denominator;
  return sign === '-' ? -rounded : rounded;
}

function decimalPower(text: string, exponent: string | undefined, suffix: string): number {
  const power = exponent !== undefined ? Number(exponent.slice(1)) : DECIMAL_SUFFIXES[suffix];
  if (power === undefined || !Number.isSafeInteger(power) || Math.abs(power) > 1000) {
    throw new Error(`"${text}" is not a Kubernetes quantity`);
  }
  return power;
}

/** CPU in nanocores (1 core = 1e9). */
export function nanocores(text: string): bigint {
  return quantityTimes(text, 1_000_000_000n);
}

/** Memory in bytes. */
export function bytes(text: string): bigint {
  return quantityTimes(text, 1n);
}
