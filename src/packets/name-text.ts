import { FormatRegistry } from '@sinclair/typebox';

// issue 15: a name is text an operator reads and types. A lone surrogate ("\ud800" in JSON)
// is not text (it cannot be encoded as UTF-8, so it would reach the store and logs mangled),
// and control characters hide in a list; both are a 422 (type string_unicode, as pydantic
// names a string that is not valid Unicode). So do the characters that show nothing or
// reorder what is shown (format characters, Cf: zero-width space, U+FEFF, the soft hyphen,
// the bidirectional overrides; the line and paragraph separators) and white space at either
// end: with them two tokens could list under one name (`branch-7` and `branch-7` with a
// zero-width space are two names to the uniqueness rule), and an operator reading the list
// would disable, revoke or grant the wrong one (review3 F3). A name of white space alone has
// white space at its ends, so it is refused too.
export const NAME_TEXT = 'name-text';
// with the u flag a paired surrogate is one code point, so Cs matches lone ones only
// Default_Ignorable_Code_Point adds the invisible characters outside Cf (the combining grapheme
// joiner U+034F, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the variation selectors:
// `branch-7` and `branch-7` with U+3164 listed alike as two tokens, review3b)
const NOT_TEXT = /[\p{Cs}\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]|^\s|\s$/u;
export const isNameText = (v: string): boolean => !NOT_TEXT.test(v);
if (!FormatRegistry.Has(NAME_TEXT)) FormatRegistry.Set(NAME_TEXT, isNameText);
/** The rule, as the refusals say it. */
export const NAME_TEXT_RULE = 'text without control, invisible or direction-changing characters, and without white space at either end';
