// samples: the three index arrays of Megatron-LM's GPTDataset (document,
// sample and shuffle index), equal element for element to the ones it builds.
//
// A GPT sample is sequence_length + extra tokens (extra = 1 or 0) read from
// the documents laid end to end in document-index order; sample s starts at
// token s * sequence_length of that stream, so neighbours share `extra`
// tokens. The sample index holds, for each s, (position in the document
// index, offset in that document) of the sample's start.
#pragma once

#include <cstdint>

namespace posembed {

// The bit generator of NumPy's legacy numpy.random.RandomState (MT19937), in
// the state get_state() shows: 624 words and the position of the next one.
struct LegacyState {
  uint32_t key[624];
  int pos;  // 0..624; 624: the next draw regenerates the words
};

// The next 32 bits RandomState's generator gives.
uint32_t legacy_next32(LegacyState& s);
// NumPy's random_interval(max): uniform in [0, max], by masking the draws to
// the smallest all-ones mask >= max and drawing again while above max (32-bit
// draws up to 2^32 - 1, 64-bit ones above).
uint64_t legacy_interval(LegacyState& s, uint64_t max);

// RandomState.shuffle of a 1-D array of n elements: for i = n - 1 down to 1,
// swap x[i] with x[legacy_interval(i)]. The same draws whatever T is, so a
// shuffled int64 array is the int32 one widened.
template <class T>
void legacy_shuffle(T* x, int64_t n, LegacyState& s);

// What makes a sample index impossible, as sample_index found it first.
struct SampleIndexFault {
  int64_t position = -1;  // the first position of the document index that is bad, or -1
  int64_t document = 0;   // its document (what was read there)
  int64_t length = 0;     // that document's length, when the document is in range
  bool too_many_tokens = false;  // the documents hold 2^62 tokens or more
};

// Megatron's build_sample_idx: out (num_samples + 1, 2) of the starts of
// samples 0..num_samples over the documents doc_index[0..ndoc) (ndoc >= 1)
// whose lengths are lengths[doc]. Entry 0 is (0, 0); entry s >= 1 is
// (k, s * seq_len - P[k]) with P[k] the tokens before position k and k the
// position whose document holds the stream's token s * seq_len + extra - 1,
// or, when the stream has no such token (the last partial sample kept),
// (ndoc - 1, lengths[doc_index[ndoc - 1]] - extra), as Megatron's loop leaves
// it. Identical for any thread count: a prefix sum of the lengths in
// document-index order, then each sample found independently.
//
// The caller's arrays may be rewritten by another thread while this runs:
// each value is read once and checked where it is read (a document outside
// 0..nlengths-1 or a negative length is a fault; out then holds nothing of
// use), and only those reads, kept in private memory, are used after.
// Requires num_samples >= 0 and (num_samples + 1) * seq_len + extra < 2^62.
template <class Len, class Doc, class Out>
SampleIndexFault sample_index(const Len* lengths, int64_t nlengths, const Doc* doc_index,
                              int64_t ndoc, int64_t seq_len, int64_t extra, int64_t num_samples,
                              Out* out);

// The tokens of documents[0..count) (of documents 0..count-1 when null),
// checked as sample_index checks them (each id and length read once);
// *total is written when no fault.
template <class Len>
SampleIndexFault document_tokens(const Len* lengths, int64_t nlengths, const int64_t* documents,
                                 int64_t count, int64_t* total);

// The document index: `documents` (ndocs ids, or 0..ndocs-1 when null) laid
// out `epochs` times in out (epochs * ndocs entries). Returns the first
// position whose id is outside 0..nlengths-1 (or past Doc's range), or -1.
// Each of the caller's ids is read once.
template <class Doc>
int64_t tile_documents(const int64_t* documents, int64_t ndocs, int64_t nlengths, int64_t epochs,
                       Doc* out);

// 0..n-1 into out.
template <class T>
void iota(T* out, int64_t n);

}  // namespace posembed
