package shardreg

import "slices"

// PageSorted pages a listing sorted by name, with the cursors of Page, for
// a caller that lists more than one registry's entries as one (a catalog
// that merges the routes other replicas hold with its own): up to limit
// items (DefaultPageSize when limit <= 0) after the name cursor holds, and
// the cursor of the next page, "" on the last. name returns an item's
// name; names must be unique and list sorted by them. A cursor that Page or
// PageSorted did not make gets ErrInvalidCursor. The page shares list's
// backing array; it costs a binary search and no allocation beyond the
// next cursor.
func PageSorted[T any](list []T, name func(*T) string, cursor string, limit int) (page []T, next string, err error) {
	after, err := decodeCursorOrEmpty(cursor)
	if err != nil {
		return nil, "", err
	}
	page, next = pageAfter(list, name, after, limit)
	return page, next, nil
}

// decodeCursorOrEmpty decodes a cursor; the empty cursor, the start of a
// walk, is the empty name, which sorts before every valid one.
func decodeCursorOrEmpty(cursor string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	return decodeCursor(cursor)
}

// pageAfter returns up to limit items of the sorted list whose names sort
// after after (DefaultPageSize when limit <= 0), sharing list's backing
// array, and the cursor of the next page, "" on the last.
func pageAfter[T any](list []T, name func(*T) string, after string, limit int) (page []T, next string) {
	start := 0
	if after != "" {
		start, _ = slices.BinarySearchFunc(list, after, func(item T, n string) int {
			if name(&item) <= n {
				return -1
			}
			return 1
		})
	}
	if limit <= 0 {
		limit = DefaultPageSize
	}
	end := start + min(limit, len(list)-start)
	page = list[start:end:end]
	if end < len(list) {
		next = encodeCursor(name(&list[end-1]))
	}
	return page, next
}
