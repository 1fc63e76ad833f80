// Package cloud registers the object-store drivers remote lakes are opened
// with: s3:// (AWS S3 and S3-compatible stores), gs:// (Google Cloud
// Storage) and azblob:// (Azure Blob Storage).
//
// As in Go Cloud, a program chooses its drivers by importing them: the
// batchlake binary imports this package, and so does any program or test
// that opens a remote lake with lake.Open. Local folders and mem:// need no
// import. The drivers pull in three cloud SDKs; keeping them out of package
// lake keeps them out of every binary that never talks to a cloud.
package cloud

import (
	_ "gocloud.dev/blob/azureblob" // azblob:// lakes
	_ "gocloud.dev/blob/gcsblob"   // gs:// lakes
	_ "gocloud.dev/blob/s3blob"    // s3:// lakes
)
