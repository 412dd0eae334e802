// Package seal encrypts personal data at rest (contacts) with AES-256-GCM under a key from config.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"herald/internal/notify"
)

// Box is an AES-256-GCM cipher. The sealed form is version byte 1, nonce, ciphertext.
type Box struct{ aead cipher.AEAD }

var _ notify.Cipher = (*Box)(nil)

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("seal: key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &Box{aead: aead}, nil
}

// FromBase64 returns a Box for a base64 (std) encoded 32-byte key.
func FromBase64(s string) (*Box, error) {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("seal: key is not base64: %w", err)
	}
	return New(key)
}

// Seal encrypts plaintext with a fresh random nonce.
func (b *Box) Seal(plaintext []byte) ([]byte, error) {
	out := make([]byte, 1+b.aead.NonceSize(), 1+b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	out[0] = 1
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return b.aead.Seal(out, out[1:], plaintext, nil), nil
}

// Open decrypts what Seal produced.
func (b *Box) Open(sealed []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != 1 {
		return nil, errors.New("seal: not a sealed value")
	}
	pt, err := b.aead.Open(nil, sealed[1:1+n], sealed[1+n:], nil)
	if err != nil {
		return nil, fmt.Errorf("seal: open: %w", err)
	}
	return pt, nil
}
