package demoserver

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"math"
)

// logoSize is the width and height of the generated PNG, in pixels.
const logoSize = 8

// makePNG draws a small gradient and encodes it as PNG. Encoding an
// in-memory image cannot fail, so an error here is a bug.
func makePNG() []byte {
	img := image.NewNRGBA(image.Rect(0, 0, logoSize, logoSize))
	for y := range logoSize {
		for x := range logoSize {
			img.SetNRGBA(x, y, color.NRGBA{
				R: uint8(x * 255 / (logoSize - 1)),
				G: uint8(y * 255 / (logoSize - 1)),
				B: 0x80,
				A: 0xff,
			})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic("demoserver: encode logo: " + err.Error())
	}
	return buf.Bytes()
}

// WAV parameters: a tenth of a second of a 440 Hz tone, 8-bit mono PCM.
const (
	wavRate    = 8000
	wavSamples = wavRate / 10
	wavToneHz  = 440
)

// makeWAV builds a tiny RIFF/WAVE file (44-byte header plus 8-bit samples).
func makeWAV() []byte {
	data := make([]byte, wavSamples)
	for i := range data {
		v := math.Sin(2 * math.Pi * wavToneHz * float64(i) / wavRate)
		data[i] = uint8(128 + 100*v) // 8-bit PCM is unsigned, centred on 128
	}
	var buf bytes.Buffer
	le := binary.LittleEndian
	buf.WriteString("RIFF")
	buf.Write(le.AppendUint32(nil, uint32(36+len(data))))
	buf.WriteString("WAVEfmt ")
	buf.Write(le.AppendUint32(nil, 16))      // fmt chunk size
	buf.Write(le.AppendUint16(nil, 1))       // PCM
	buf.Write(le.AppendUint16(nil, 1))       // channels
	buf.Write(le.AppendUint32(nil, wavRate)) // sample rate
	buf.Write(le.AppendUint32(nil, wavRate)) // byte rate: rate * channels * 1 byte
	buf.Write(le.AppendUint16(nil, 1))       // block align
	buf.Write(le.AppendUint16(nil, 8))       // bits per sample
	buf.WriteString("data")
	buf.Write(le.AppendUint32(nil, uint32(len(data))))
	buf.Write(data)
	return buf.Bytes()
}
