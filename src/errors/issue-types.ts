// Every `type` a 422 detail item can carry, declared once so that the OpenAPI document can
// list them for generated clients. The emitters keep their literals where the rule lives;
// test/openapi/catalogues.test.ts scans the sources and fails when one is missing here.

export const ISSUE_TYPES = [
  // schema checks (pydantic's names where pydantic has one)
  'missing', 'extra_forbidden', 'dict_type', 'list_type', 'too_short', 'too_long', 'finite_number',
  'int_from_float', 'int_type', 'float_type', 'greater_than_equal', 'less_than_equal', 'string_type',
  'string_too_short', 'string_too_long', 'string_pattern_mismatch', 'bool_type', 'literal_error',
  'union_error', 'value_error', 'model_type', 'too_many_errors', 'int_parsing', 'datetime_parsing',
  // bodies
  'json_invalid', 'json_type', 'multipart_invalid', 'string_unicode',
  // packet rules
  'mode_not_in_module', 'capture_profile_mismatch', 'duplicate_capture_id', 'frames_empty',
  'too_many_events', 'phases_incomplete', 'not_increasing', 'field_forbidden', 'phase_order',
  'display_time_after_exposure', 'display_time_not_after_previous', 'source_size_changed',
  'eyes_outside_image', 'eyes_not_sorted', 'eyes_too_close', 'part_reserved', 'duplicate_part',
  'part_name_unsendable',
  // multipart parts against the metadata
  'metadata_duplicate', 'metadata_not_text', 'part_duplicate', 'part_missing', 'part_not_file',
  'sha256_mismatch', 'part_unreferenced',
  // image bytes
  'png_chunk_order', 'png_idat_not_contiguous', 'png_invalid_chunk', 'png_invalid_crc',
  'png_invalid_filter', 'png_invalid_ihdr', 'png_invalid_signature', 'png_invalid_zlib',
  'png_missing_idat', 'png_missing_iend', 'png_missing_ihdr', 'png_trailing_data', 'png_truncated',
  'png_unknown_critical_chunk', 'png_unsupported_bit_depth', 'png_unsupported_color_type',
  'png_unsupported_interlace', 'png_unsupported_transparency', 'png_wrong_data_length',
  'png_wrong_size', 'rgb8_wrong_size',
] as const;

export type IssueType = (typeof ISSUE_TYPES)[number];
