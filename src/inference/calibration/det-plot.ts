// A DET plot (ISO/IEC 19795-1 style: both error rates on normal-deviate axes, so curves of
// well-behaved score distributions come out nearly straight) as a standalone SVG. Written
// by hand: a few dozen lines of markup, where a charting library would pull a DOM into the
// CLI.
import type { CurvePoint, Rates } from './metrics.ts';

const W = 560;
const H = 510;
const LEFT = 70;
const TOP = 40;
const SIDE = 420;
/** axis range in rates: 0.1 % to 60 %; rates outside are drawn on the border */
const LO = 0.001;
const HI = 0.6;
const TICKS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6];

/** Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9). */
export function probit(p: number): number {
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const lowP = 0.02425;
  if (p < lowP) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) / ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  }
  if (p > 1 - lowP) return -probit(1 - p);
  const q = p - 0.5;
  const r = q * q;
  return ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) / (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1);
}

function axis(rate: number): number {
  const clamped = Math.min(HI, Math.max(LO, rate));
  return (probit(clamped) - probit(LO)) / (probit(HI) - probit(LO));
}
const px = (apcer: number) => LEFT + axis(apcer) * SIDE;
const py = (bpcer: number) => TOP + SIDE - axis(bpcer) * SIDE;
const pct = (r: number) => `${+(r * 100).toFixed(1)}%`;
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

export interface Marker {
  label: string;
  at: Rates;
}

export function detSvg(title: string, points: readonly CurvePoint[], markers: readonly Marker[]): string {
  const out: string[] = [];
  const height = H + markers.length * 14;
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif" font-size="11">`);
  out.push(`<title>${esc(title)}</title>`);
  out.push(`<rect width="${W}" height="${height}" fill="white"/>`);
  out.push(`<text x="${LEFT + SIDE / 2}" y="22" text-anchor="middle" font-size="13">${esc(title)}</text>`);
  for (const t of TICKS) {
    out.push(`<line x1="${px(t).toFixed(1)}" y1="${TOP}" x2="${px(t).toFixed(1)}" y2="${TOP + SIDE}" stroke="#ddd"/>`);
    out.push(`<line x1="${LEFT}" y1="${py(t).toFixed(1)}" x2="${LEFT + SIDE}" y2="${py(t).toFixed(1)}" stroke="#ddd"/>`);
    out.push(`<text x="${px(t).toFixed(1)}" y="${TOP + SIDE + 14}" text-anchor="middle">${pct(t)}</text>`);
    out.push(`<text x="${LEFT - 6}" y="${(py(t) + 4).toFixed(1)}" text-anchor="end">${pct(t)}</text>`);
  }
  out.push(`<rect x="${LEFT}" y="${TOP}" width="${SIDE}" height="${SIDE}" fill="none" stroke="black"/>`);
  // the EER line: APCER = BPCER
  out.push(`<line x1="${px(LO)}" y1="${py(LO)}" x2="${px(HI)}" y2="${py(HI)}" stroke="#aaa" stroke-dasharray="4 3"/>`);
  out.push(`<text x="${LEFT + SIDE / 2}" y="${TOP + SIDE + 32}" text-anchor="middle">APCER (attacks accepted)</text>`);
  out.push(`<text transform="translate(18 ${TOP + SIDE / 2}) rotate(-90)" text-anchor="middle">BPCER (bona fide rejected)</text>`);
  const path = points.map((p, i) => `${i ? 'L' : 'M'}${px(p.apcer).toFixed(1)} ${py(p.bpcer).toFixed(1)}`).join(' ');
  if (path) out.push(`<path d="${path}" fill="none" stroke="#1f5fbf" stroke-width="2"/>`);
  markers.forEach((m, i) => {
    const x = px(m.at.apcer);
    const y = py(m.at.bpcer);
    out.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="4" fill="#c0392b"/>`);
    out.push(`<text x="${LEFT}" y="${H - 6 + i * 14}" fill="#c0392b">${i + 1}: ${esc(m.label)}</text>`);
    out.push(`<text x="${(x + 6).toFixed(1)}" y="${(y - 6).toFixed(1)}" fill="#c0392b">${i + 1}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
