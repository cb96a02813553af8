import { FormatRegistry } from '@sinclair/typebox';

// issue 15: a name is text an operator reads and types. A lone surrogate ("\ud800" in JSON)
// is not text (it cannot be encoded as UTF-8, so it would reach the store and logs mangled),
// and control characters hide in a list; both are a 422 (type string_unicode, as pydantic
// names a string that is not valid Unicode).
export const NAME_TEXT = 'name-text';
// with the u flag a paired surrogate is one code point, so Cs matches lone ones only
const NOT_TEXT = /[\p{Cs}\p{Cc}]/u;
export const isNameText = (v: string): boolean => !NOT_TEXT.test(v);
if (!FormatRegistry.Has(NAME_TEXT)) FormatRegistry.Set(NAME_TEXT, isNameText);
