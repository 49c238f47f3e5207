//! Line numbers of byte offsets in a text, for errors that name `file:line` (scenario and
//! calibration files).
//!
//! A scenario's validation asks for the line of nearly every value it checks, and a large
//! scenario has tens of thousands of them: counting the newlines before each offset anew
//! would be quadratic in the file's size. [`LineIndex`] records where the newlines are in one
//! pass and answers each question by a binary search.

/// Where the newlines of a text are, to find the line of any byte offset in
/// `O(log lines)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIndex {
    /// Byte offsets of every `\n`, ascending.
    newlines: Vec<usize>,
    /// The text's length in bytes: offsets past it count as its end.
    len: usize,
}

impl LineIndex {
    /// Indexes `text` (one pass over its bytes).
    pub fn new(text: &str) -> LineIndex {
        let newlines = text
            .bytes()
            .enumerate()
            .filter_map(|(i, b)| (b == b'\n').then_some(i))
            .collect();
        LineIndex {
            newlines,
            len: text.len(),
        }
    }

    /// The 1-based line of byte `offset`: one more than the newlines before it. An offset
    /// past the end is on the last line; an offset inside a multi-byte character is on that
    /// character's line (a newline is one byte and never part of another character).
    pub fn line_of(&self, offset: usize) -> usize {
        let offset = offset.min(self.len);
        self.newlines.partition_point(|&nl| nl < offset) + 1
    }
}

/// The 1-based line of byte `offset` in `text` (scenario and calibration errors name it), for
/// a single question; many questions about one text go to a [`LineIndex`].
pub fn line_of(text: &str, offset: usize) -> usize {
    let before = &text.as_bytes()[..offset.min(text.len())];
    before.iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both answers for every offset of `text` and a few past its end.
    fn lines(text: &str) -> Vec<usize> {
        let index = LineIndex::new(text);
        (0..text.len() + 3)
            .map(|o| {
                let line = index.line_of(o);
                assert_eq!(line, line_of(text, o), "{text:?} at {o}");
                line
            })
            .collect()
    }

    #[test]
    fn an_empty_text_is_one_line() {
        assert_eq!(lines(""), [1, 1, 1]);
    }

    #[test]
    fn a_newline_belongs_to_the_line_it_ends_and_the_next_line_starts_after_it() {
        // Offsets:     a=0 \n=1 b=2 c=3 \n=4, then past the end.
        assert_eq!(lines("a\nbc\n"), [1, 1, 2, 2, 2, 3, 3, 3]);
    }

    #[test]
    fn a_last_line_without_a_newline_runs_to_the_end_and_beyond() {
        assert_eq!(lines("a\nb"), [1, 1, 2, 2, 2, 2]);
    }

    #[test]
    fn empty_lines_each_count() {
        assert_eq!(lines("\n\n\n"), [1, 2, 3, 4, 4, 4]);
    }

    #[test]
    fn offsets_inside_and_after_multi_byte_characters_are_on_their_line() {
        // "é" is two bytes and "→" three: "é\n→x\n" has bytes é é \n → → → x \n.
        assert_eq!(lines("é\n→x\n"), [1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3]);
        let text = "# ü\nram = \"1 GiB\"\n";
        let at = text.find("ram").expect("present");
        assert_eq!(LineIndex::new(text).line_of(at), 2);
    }

    proptest! {
        #[test]
        fn the_index_agrees_with_counting_the_newlines_before_the_offset(
            text in "[a\n\u{e9}\u{2192}]{0,64}",
            offset in 0usize..80,
        ) {
            let counted = text.as_bytes().iter().take(offset).filter(|&&b| b == b'\n').count();
            prop_assert_eq!(LineIndex::new(&text).line_of(offset), counted + 1);
            prop_assert_eq!(line_of(&text, offset), counted + 1);
        }
    }
}
