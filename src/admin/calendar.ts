// Whether an ISO 8601 text names a real calendar date and clock time. Date.parse takes
// 2027-02-30 as 2027-03-02 and T24:00 as the next day's midnight (V8 rolls an impossible field
// over instead of refusing it), so an operator's typo was stored as another instant than the
// one sent, and answered 201. Checked field by field, beside the patterns that say the shape.

const TEXT = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2}))?)?$/;

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** The date's month and day exist in its year; the time, if any, is 00:00:00 to 23:59:59.x,
 * and an offset's hours and minutes are those of a clock (no leap second: 60 is refused). */
export function isCalendarText(text: string): boolean {
  const m = TEXT.exec(text);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return false;
  const within = (v: string | undefined, max: number) => v === undefined || Number(v) <= max;
  return within(m[4], 23) && within(m[5], 59) && within(m[6], 59) && within(m[7], 23) && within(m[8], 59);
}
